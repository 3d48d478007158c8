//! Sorted ranks as a person reads them: runs of three or more consecutive
//! ranks joined (`1, 3, 4, 6–8`), for summaries and reports alike.

/// `ranks` (sorted) with runs of three or more consecutive ones joined.
pub fn rank_ranges(ranks: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(match j - i {
            0 => ranks[i].to_string(),
            1 => format!("{}, {}", ranks[i], ranks[j]),
            _ => format!("{}–{}", ranks[i], ranks[j]),
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_three_or_more_consecutive_ranks_are_joined() {
        assert_eq!(rank_ranges(&[48, 49, 50, 51, 52, 53, 54, 55]), "48–55");
        assert_eq!(rank_ranges(&[1, 3, 4, 6, 7, 8, 12]), "1, 3, 4, 6–8, 12");
        assert_eq!(rank_ranges(&[]), "");
    }
}

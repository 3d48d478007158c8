//! A small seeded PRNG (splitmix64) with keyed sub-streams.
//!
//! Every host, rank and file draws from its own stream derived from the job
//! seed and its ids, so output does not depend on the order rayon happens to
//! run things in, and adding a draw in one place does not shift another's.

/// splitmix64: tiny, fast, and good enough to make logs look unplanned.
#[derive(Debug, Clone)]
pub struct Rng(u64);

const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(mix(seed ^ GOLDEN))
    }

    /// The stream for one named purpose and ids (`"rank", &[r]`).
    pub fn derive(seed: u64, tag: &str, ids: &[u64]) -> Rng {
        let mut h = mix(seed.wrapping_add(GOLDEN));
        for b in tag.bytes() {
            h = mix(h ^ u64::from(b));
        }
        for &id in ids {
            h = mix(h ^ id.wrapping_mul(GOLDEN));
        }
        Rng(h)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            return lo;
        }
        lo + self.below((hi - lo) as u64 + 1) as i64
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / ((1u64 << 53) as f64) < p
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    pub fn index(&mut self, len: usize) -> usize {
        self.below(len as u64) as usize
    }

    /// `digits` lowercase hex digits.
    pub fn hex(&mut self, digits: usize) -> String {
        let mut s = String::with_capacity(digits);
        for _ in 0..digits {
            let d = self.below(16) as u32;
            s.push(char::from_digit(d, 16).unwrap_or('0'));
        }
        s
    }

    /// `len` lowercase letters and digits (torchrun's run-id suffixes).
    pub fn alnum(&mut self, len: usize) -> String {
        const SET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
        (0..len).map(|_| char::from(*self.pick(SET))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_same_stream() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::derive(7, "rank", &[3]);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::derive(7, "rank", &[3]);
        let b: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        assert_ne!(
            Rng::derive(7, "rank", &[3]).next_u64(),
            Rng::derive(7, "rank", &[4]).next_u64()
        );
    }

    #[test]
    fn ranges_hold() {
        let mut r = Rng::new(1);
        for _ in 0..1000 {
            let v = r.range(-3, 5);
            assert!((-3..=5).contains(&v));
            assert!(r.below(7) < 7);
        }
    }
}

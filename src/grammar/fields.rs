//! Turning captured text into typed field values.

use super::spec::FieldKind;
use crate::model::Value;

/// Converts one capture by its declared kind; a value that does not parse as its
/// kind is kept as text rather than dropped, so nothing the line said is lost.
pub fn convert_field(kind: FieldKind, raw: &str) -> Value {
    let parsed = match kind {
        FieldKind::Text => None,
        FieldKind::Int => raw.trim().parse::<i64>().ok().map(Value::Int),
        FieldKind::Hex => {
            let digits = raw.trim().trim_start_matches("0x").trim_start_matches("0X");
            i64::from_str_radix(digits, 16).ok().map(Value::Int)
        }
        FieldKind::BusId => normalize_bus_id(raw).map(|b| Value::Text(b.into())),
        FieldKind::Upper => Some(Value::Text(raw.to_ascii_uppercase().into())),
        FieldKind::NcclVersion => torch_split_version(raw).map(|v| Value::Text(v.into())),
    };
    parsed.unwrap_or_else(|| Value::Text(raw.into()))
}

/// PyTorch 1.9–1.11 split NCCL's version code as if it were the pre-2.9
/// `major*1000 + minor*100 + patch`; 2.9+'s `major*10000 + minor*100 +
/// patch` then prints as `21.0.3` (2.10.3) or `21.4.3` (2.14.3). No NCCL has
/// a major release of 20 or more, so such a version is that misprint.
fn torch_split_version(raw: &str) -> Option<String> {
    let mut parts = raw.trim().splitn(3, '.').map(|p| p.parse::<u32>().ok());
    let (a, b, c) = (parts.next()??, parts.next()??, parts.next()??);
    if a < 20 || b > 9 {
        return None;
    }
    let code = a * 1000 + b * 100 + c;
    Some(format!(
        "{}.{}.{}",
        code / 10000,
        code % 10000 / 100,
        code % 100
    ))
}

/// Normalises a GPU / NIC PCI address to `dddd:bb:dd.f` (lowercase).
///
/// Accepts NCCL's `busId` (`41000`: the address with separators dropped, printed
/// as hex without leading zeros), kernel and nvidia-smi forms (`0000:41:00.0`,
/// `00000000:41:00.0`) and the Xid form without a function (`0000:41:00`).
pub fn normalize_bus_id(raw: &str) -> Option<String> {
    let raw = raw.trim().trim_start_matches("0x").to_ascii_lowercase();
    if raw.contains(':') {
        return normalize_pci_address(&raw);
    }
    if raw.is_empty() || raw.len() > 9 || !raw.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let padded = format!("{raw:0>9}");
    Some(format!(
        "{}:{}:{}.{}",
        &padded[0..4],
        &padded[4..6],
        &padded[6..8],
        &padded[8..9]
    ))
}

fn normalize_pci_address(raw: &str) -> Option<String> {
    let (head, function) = match raw.rsplit_once('.') {
        Some((h, f)) => (h, f),
        None => (raw, "0"),
    };
    let parts: Vec<&str> = head.split(':').collect();
    let (domain, bus, device) = match parts.as_slice() {
        [d, b, dev] => (*d, *b, *dev),
        [b, dev] => ("0", *b, *dev),
        _ => return None,
    };
    // Linux 5.14's DMAR lines print each part with `0x`.
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    Some(format!(
        "{:04x}:{:02x}:{:02x}.{:x}",
        hex(domain)? & 0xffff,
        hex(bus)?,
        hex(device)?,
        hex(function)?
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn torch_1_10s_split_nccl_codes_are_put_right() {
        let v = |raw| convert_field(FieldKind::NcclVersion, raw);
        assert_eq!(v("21.0.3"), Value::Text("2.10.3".into()));
        assert_eq!(v("21.4.3"), Value::Text("2.14.3".into()));
        assert_eq!(v("22.1.5"), Value::Text("2.21.5".into()));
        // What NCCL itself prints stays as it is.
        assert_eq!(v("2.18.3"), Value::Text("2.18.3".into()));
        assert_eq!(v("2.9.9"), Value::Text("2.9.9".into()));
    }

    use super::*;

    #[test]
    fn nccl_bus_ids_map_back_to_pci_addresses() {
        assert_eq!(normalize_bus_id("41000").unwrap(), "0000:41:00.0");
        assert_eq!(normalize_bus_id("100000").unwrap(), "0001:00:00.0");
        assert_eq!(normalize_bus_id("7000").unwrap(), "0000:07:00.0");
        assert_eq!(normalize_bus_id("1b000").unwrap(), "0000:1b:00.0");
    }

    #[test]
    fn pci_forms_of_kernel_and_nvidia_smi_agree() {
        assert_eq!(normalize_bus_id("0000:41:00.0").unwrap(), "0000:41:00.0");
        assert_eq!(
            normalize_bus_id("00000000:41:00.0").unwrap(),
            "0000:41:00.0"
        );
        assert_eq!(normalize_bus_id("0000:AF:00").unwrap(), "0000:af:00.0");
        assert_eq!(normalize_bus_id("zz"), None);
    }

    #[test]
    fn unparsable_numbers_stay_text() {
        assert_eq!(convert_field(FieldKind::Int, "12"), Value::Int(12));
        assert_eq!(convert_field(FieldKind::Int, "x"), Value::Text("x".into()));
        assert_eq!(convert_field(FieldKind::Hex, "0x1f"), Value::Int(31));
    }
}

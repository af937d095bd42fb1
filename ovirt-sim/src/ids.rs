//! Identifiers, MAC and IP addresses, and engine-style timestamps.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A random UUID (version 4 layout), as the engine uses for every object.
pub fn new_id() -> String {
    let a = fastrand::u32(..);
    let b = fastrand::u16(..);
    let c = fastrand::u16(..) & 0x0fff;
    let d = (fastrand::u16(..) & 0x3fff) | 0x8000;
    let e = fastrand::u64(..) & 0xffff_ffff_ffff;
    format!("{a:08x}-{b:04x}-4{c:03x}-{d:04x}-{e:012x}")
}

static MAC_COUNTER: AtomicU64 = AtomicU64::new(1);

/// MACs from the engine's default pool prefix `56:6f`.
pub fn new_mac() -> String {
    let n = MAC_COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "56:6f:{:02x}:{:02x}:{:02x}:{:02x}",
        (n >> 24) & 0xff,
        (n >> 16) & 0xff,
        (n >> 8) & 0xff,
        n & 0xff
    )
}

/// A stable id derived from a name, shaped as a UUID (version 3 bits set). The engine derives reported-device ids
/// from the interface name and MAC with `UUID.nameUUIDFromBytes` (MD5); a stable 128-bit FNV-1a hash serves the same
/// purpose here: the same interface keeps its id across polls.
pub fn name_based_id(name: &str) -> String {
    let mut hash: u128 = 0x6c62272e07bb014262b821756295c58d;
    for byte in name.bytes() {
        hash ^= u128::from(byte);
        hash = hash.wrapping_mul(0x0000000001000000000000000000013B);
    }
    let mut bytes = hash.to_be_bytes();
    bytes[6] = (bytes[6] & 0x0f) | 0x30;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The n-th guest address in 10.0.0.0/8 (skipping .0 and .255 host parts).
pub fn guest_ipv4(n: u64) -> String {
    let host = n % 65_000;
    let net = (n / 65_000) % 250;
    let third = host / 250;
    let fourth = host % 250 + 2;
    format!("10.{net}.{third}.{fourth}")
}

/// The link-local IPv6 address a guest derives from its MAC (EUI-64).
pub fn link_local_ipv6(mac: &str) -> String {
    let bytes: Vec<u8> = mac
        .split(':')
        .filter_map(|part| u8::from_str_radix(part, 16).ok())
        .collect();
    if bytes.len() != 6 {
        return "fe80::1".to_string();
    }
    format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        u16::from_be_bytes([bytes[0] ^ 0x02, bytes[1]]),
        u16::from_be_bytes([bytes[2], 0xff]),
        u16::from_be_bytes([0xfe, bytes[3]]),
        u16::from_be_bytes([bytes[4], bytes[5]])
    )
}

pub fn now_millis() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// `2022-10-06T15:05:04.618Z`-style text in the engine's form (`+00:00` offset).
pub fn format_time(epoch_millis: i64) -> String {
    let millis = epoch_millis.rem_euclid(1000);
    let secs = epoch_millis.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}+00:00",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Parses text produced by [`format_time`] back into epoch milliseconds (for JSON output,
/// where the engine sends dates as numbers).
pub fn parse_time(text: &str) -> Option<i64> {
    let bytes = text.as_bytes();
    if bytes.len() < 23 {
        return None;
    }
    let num = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second, millis) = (num(11..13)?, num(14..16)?, num(17..19)?, num(20..23)?);
    let days = days_from_civil(year, month, day);
    Some(((days * 86_400 + hour * 3600 + minute * 60 + second) * 1000) + millis)
}

// Howard Hinnant's civil calendar algorithms.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether Java's `UUID.fromString` takes `text` (the engine parses every id so): five dash-separated groups of hex
/// digits, at most 36 characters.
pub fn is_uuid(text: &str) -> bool {
    let groups: Vec<&str> = text.split('-').collect();
    text.len() <= 36
        && groups.len() == 5
        && groups
            .iter()
            .all(|g| !g.is_empty() && g.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_round_trips() {
        let t = 1_665_068_704_618;
        assert_eq!(format_time(t), "2022-10-06T15:05:04.618+00:00");
        assert_eq!(parse_time(&format_time(t)), Some(t));
    }

    #[test]
    fn ids_look_like_uuids() {
        let id = new_id();
        assert_eq!(id.len(), 36);
        assert_eq!(id.matches('-').count(), 4);
    }

    #[test]
    fn link_local_from_mac() {
        assert_eq!(link_local_ipv6("56:6f:a5:e5:00:03"), "fe80::546f:a5ff:fee5:3");
    }
}

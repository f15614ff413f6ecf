//! Facts about the host that go into a run's conditions.

use std::time::{SystemTime, UNIX_EPOCH};

fn uname_field(pick: fn(&libc::utsname) -> &[libc::c_char]) -> String {
    // SAFETY: utsname is plain data; uname fills it or fails and leaves zeros.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut uts) } != 0 {
        return "unknown".into();
    }
    let bytes: Vec<u8> = pick(&uts).iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The host name.
pub fn hostname() -> String {
    uname_field(|u| &u.nodename)
}

/// Kernel name and release, e.g. `Linux 6.1.0-18-amd64`.
pub fn kernel() -> String {
    format!("{} {}", uname_field(|u| &u.sysname), uname_field(|u| &u.release))
}

/// Seconds since the Unix epoch as (year, month, day, hour, minute, second), UTC.
fn civil(seconds: u64) -> (i64, u32, u32, u32, u32, u32) {
    let days = (seconds / 86_400) as i64;
    let rem = seconds % 86_400;
    // Howard Hinnant's days-from-civil, inverted.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day, (rem / 3600) as u32, (rem / 60 % 60) as u32, (rem % 60) as u32)
}

fn now_seconds() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// ISO 8601 UTC time, e.g. `2026-11-22T02:10:51Z`.
pub fn utc_iso(seconds: u64) -> String {
    let (y, mo, d, h, mi, s) = civil(seconds);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// Now, ISO 8601 UTC.
pub fn now_utc_iso() -> String {
    utc_iso(now_seconds())
}

/// Now, compact for file names, e.g. `20261122T021051Z`.
pub fn now_utc_compact() -> String {
    now_utc_iso().replace(['-', ':'], "")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates_are_civil() {
        assert_eq!(utc_iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_iso(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_iso(1_795_832_451), "2026-11-28T02:20:51Z");
        assert!(!hostname().is_empty());
        assert!(kernel().contains(' '));
    }
}

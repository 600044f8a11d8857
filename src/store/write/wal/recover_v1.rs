//! Reading a version 1 segment (`len crc payload` records, no header
//! checksum): what [`super::recover`] falls back to for a segment that does
//! not begin with `SWAL`.

use super::recover::{damage, torn, Parsed, V1_HEADER};
use super::{Format, MAX_RECORD};

/// Version 1: `len crc payload` records. A tear is a record cut short, or
/// one failing its CRC as the very last bytes.
pub(super) fn parse_v1(buf: &[u8]) -> Parsed {
    let mut records = Vec::new();
    let mut pos = 0usize;
    let stop = loop {
        if pos == buf.len() {
            break None;
        }
        let rest = buf.len() - pos;
        if rest < V1_HEADER {
            break torn(pos, format!("a {rest}-byte fragment of a record header"));
        }
        let h = &buf[pos..pos + V1_HEADER];
        let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]) as usize;
        let crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        if len > MAX_RECORD {
            // No record this long was ever written: not a tear of one.
            break damage(
                pos,
                format!(
                    "a record header declaring {len} bytes, past the {MAX_RECORD}-byte limit \
                     (version 1: no header checksum)"
                ),
            );
        }
        if len > rest - V1_HEADER {
            break torn(
                pos,
                format!(
                    "a record of {len} bytes with {} left (version 1: no header checksum)",
                    rest - V1_HEADER
                ),
            );
        }
        if len == 0 {
            // Version 1 never wrote an empty record: zeros to the end are a
            // write the disk never reached (the file grew, its data did not).
            break if buf[pos..].iter().all(|&b| b == 0) {
                torn(pos, format!("{rest} bytes of zeros (never written)"))
            } else {
                damage(
                    pos,
                    "an empty record, which version 1 never wrote: zeros where a record \
                     belongs (a lost sector; of a version 2 segment too, whose header it took)"
                        .to_string(),
                )
            };
        }
        let payload = &buf[pos + V1_HEADER..pos + V1_HEADER + len];
        if crc32fast::hash(payload) != crc {
            let what = format!("a {len}-byte record failing its CRC");
            break if pos + V1_HEADER + len == buf.len() {
                torn(pos, what)
            } else {
                damage(pos, what)
            };
        }
        records.push(payload.to_vec());
        pos += V1_HEADER + len;
    };
    Parsed {
        format: Format::V1,
        records,
        stop,
    }
}

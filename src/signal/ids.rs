//! Signal and incident ids: a prefix and consonants of the key's hash,
//! lengthened while taken, so two keys never share one and an id never
//! changes.

/// The id a new key gets: `SW-` and four letters from its hash, one more
/// letter for as long as that id is taken (`taken` says so). Existing ids
/// never change; two keys can never share one.
pub fn free_id(
    key: &str,
    taken: impl FnMut(&str) -> rusqlite::Result<bool>,
) -> rusqlite::Result<String> {
    free_id_with("SW-", key, taken)
}

/// [`free_id`] for ids of another prefix (incidents' `INC-`): the prefix
/// and 4 to 14 consonants of the key's hash, the first not `taken`.
pub fn free_id_with(
    prefix: &str,
    key: &str,
    mut taken: impl FnMut(&str) -> rusqlite::Result<bool>,
) -> rusqlite::Result<String> {
    for letters in 4..=14 {
        let id = format!("{prefix}{}", &super::group::short_id_of(key, letters)[3..]);
        if !taken(&id)? {
            return Ok(id);
        }
    }
    // 14 letters of a 64-bit hash are all of it: fall back to the key's hash in hex.
    Ok(format!(
        "{prefix}{:016X}",
        xxhash_rust::xxh3::xxh3_64(key.as_bytes())
    ))
}

//! The names on the shared store: a day's directory under the prefix (as
//! in a data directory), a part's name (its local file name), the days
//! there are, and the node ids that go into part names. The layout under
//! the prefix is in [`super`]'s documentation.

use super::client::Remote;
use super::error::ClusterError;

/// The file name of a path relative to the data directory: a part's name
/// on the shared store is its local one.
pub fn file_name(path: &str) -> Option<String> {
    std::path::Path::new(path)
        .file_name()?
        .to_str()
        .map(str::to_string)
}

/// A day's directory under the prefix (as in the data directory).
pub fn day_dir(day: i32) -> String {
    format!("spans/date={}", crate::model::day_to_string(day))
}

/// The days the shared store holds spans for, in order.
pub async fn days(remote: &Remote) -> Result<Vec<i32>, ClusterError> {
    let mut days: Vec<i32> = remote
        .list_dirs("spans")
        .await?
        .iter()
        .filter_map(|d| d.strip_prefix("date="))
        .filter_map(crate::model::day_from_str)
        .collect();
    days.sort_unstable();
    Ok(days)
}

/// A node id as it goes into part names: letters, digits, `-` and `_`.
pub fn check_node_id(id: &str) -> Result<(), ClusterError> {
    if id.is_empty() || id.len() > 63 {
        return Err(ClusterError::NodeId(format!(
            "a node id is 1 to 63 characters; got {} ({id:?})",
            id.len()
        )));
    }
    match id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
    {
        Some(c) => Err(ClusterError::NodeId(format!(
            "a node id holds letters, digits, - and _ only (it goes into part names); {id:?} has {c:?}"
        ))),
        None => Ok(()),
    }
}

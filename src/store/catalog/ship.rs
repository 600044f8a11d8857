//! The hook a commit ships its parts through when the data directory takes
//! part in a shared store ([`Shipper`], implemented by `crate::cluster`);
//! an ingest node's [`super::layout::Layout`] carries one.

use std::path::Path;

use crate::store::StoreError;

/// Where a flush's parts go before the WAL segments they cover are deleted.
pub trait Shipper: std::fmt::Debug + Send + Sync {
    /// The shared store's address (`s3://…`), recorded in the commit
    /// intent so a restart with another `--store` is refused.
    fn url(&self) -> &str;

    /// The name on the shared store of `day`'s part at `part` (relative
    /// to the data directory).
    fn name(&self, day: i32, part: &str) -> String;

    /// Upload the local part `local` (of `size` bytes) to `name`, unless it
    /// is there already with that size (an apply repeated after a crash;
    /// names are never reused, so what is there is this part). Blocking.
    fn ship(&self, local: &Path, name: &str, size: u64) -> Result<(), StoreError>;
}

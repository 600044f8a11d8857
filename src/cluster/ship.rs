//! An ingest node's side of the shared store: the parts a flush writes go
//! to their day's directory there, under their own names, before the WAL
//! segments they cover are deleted. The store's commit calls this
//! ([`Shipper`]); an ingest node's layout carries it.

use std::path::Path;

use super::client::Remote;
use super::keys::{day_dir, file_name};
use crate::store::hooks::Shipper;
use crate::store::StoreError;

/// Ships parts to one shared store.
#[derive(Debug, Clone)]
pub struct Ship {
    remote: Remote,
}

impl Ship {
    pub fn new(remote: Remote) -> Ship {
        Ship { remote }
    }
}

impl Shipper for Ship {
    fn url(&self) -> &str {
        self.remote.url()
    }

    /// Under the part's own name, in its day's directory there.
    fn name(&self, day: i32, part: &str) -> String {
        format!("{}/{}", day_dir(day), file_name(part).unwrap_or_default())
    }

    fn ship(&self, local: &Path, name: &str, size: u64) -> Result<(), StoreError> {
        let there = Remote::block(self.remote.size(name))?;
        if there != Some(size) {
            Remote::block(self.remote.upload(name, local))?;
        }
        Ok(())
    }
}

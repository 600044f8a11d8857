//! The fence a detect role's sweep checks inside its state transaction,
//! before it commits: the lease generation the sweep began under is still
//! the one this node acts under ([`Acting`], the leader's). Otherwise the sweep's
//! changes are dropped, and the holder sweeps again. The store's
//! [`Fence`] hook, implemented over the lease.

use std::sync::Arc;

use crate::store::hooks::{Fence, FenceLost};

/// What a fence asks of the role that acts under a lease.
pub trait Acting: Send + Sync + std::fmt::Debug {
    /// The generation this node holds and acts under, if any.
    fn acting(&self) -> Option<u64>;
}

/// A sweep's fence: its generation still held.
#[derive(Debug, Clone)]
pub struct LeaseFence {
    leader: Arc<dyn Acting>,
    generation: u64,
}

impl LeaseFence {
    pub fn new(leader: Arc<dyn Acting>, generation: u64) -> LeaseFence {
        LeaseFence { leader, generation }
    }
}

impl Fence for LeaseFence {
    fn check(&self) -> Result<(), FenceLost> {
        let generation = self.generation;
        match self.leader.acting() {
            Some(g) if g == generation => Ok(()),
            _ => Err(FenceLost { generation }),
        }
    }
}

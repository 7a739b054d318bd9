//! The logic contract: a switching logic classifies a whole batch into
//! verdicts; the fabric does everything else (grouping, reservation,
//! copying, accounting). A logic never touches rings, buffers or locks.
//!
//! Implementations live in the `logic` crate, one file each, listed in its
//! table. The trait lives here because the worker loop calls it.
//!
//! Threading: one logic object is shared by every worker (`&self`), so state
//! the workers update (a learning table) must be lock-free or read-mostly.
//! The fabric swaps the whole logic atomically between batches; a batch is
//! always classified by exactly one logic.
//!
//! Per-worker state: a logic that wants state of its own per worker (a
//! cache) makes it in [`Logic::worker_state`]; the fabric calls that on
//! the control path when the logic is installed, once per worker, and
//! hands each worker's batches to [`Logic::classify_with`] with `&mut`
//! access to that worker's object: no lock, no atomic claim. A new logic
//! (a swap) brings new states; the old ones are dropped by their workers.
//! Callers without a worker (tests, the control path's packet-out) keep
//! calling [`Logic::classify`].
//!
//! Punt path: a logic that hands frames to the control plane (`flows`'
//! packet-ins) offers its queue, a fabric [`crate::punt::Punt`], through
//! [`Logic::punt`]; the control plane consumes the running logic's
//! through [`crate::Switch::punt`].

use std::any::Any;

use crate::batch::Pkts;
use crate::drop::DropReason;
use crate::port::PortId;
use crate::punt::Punt;

/// Index of a port group defined by a logic (mirroring, multi-output).
pub type GroupId = u16;

/// Where one packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// To exactly one port.
    Port(PortId),
    /// To every port but the ingress.
    Flood,
    /// To every member of a group defined by the logic (see
    /// [`Logic::group_members`]), except the ingress.
    Group(GroupId),
    /// Nowhere, for this reason.
    Drop(DropReason),
}

/// Per-batch context handed to `classify`.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// Monotonic time at the start of the batch, in nanoseconds (coarse).
    pub now_ns: u64,
    /// Index of the calling worker.
    pub worker: u16,
}

/// Error answered by a logic command; lower-case message for the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandError(pub String);

impl std::fmt::Display for CommandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CommandError {}

/// A logic's state for one worker ([`Logic::worker_state`]).
pub type WorkerState = Box<dyn Any + Send>;

/// A switching logic. (A method added here is forwarded by the `Arc<T>`
/// impl below too.)
pub trait Logic: Send + Sync {
    /// Name as listed in the logic table.
    fn name(&self) -> &'static str;

    /// Sets `verdicts[i]` for every `pkts[i]` received on `ingress`.
    /// `verdicts.len() == pkts.len()`; every frame is at least 14 bytes
    /// (the fabric drops runts first). A logic that rewrites headers does so
    /// in place through [`crate::PktMut::data_mut`] (`pkts.get_mut(i)` or
    /// `pkts.iter_mut()`). The views live only for this call. Must not
    /// allocate or block.
    fn classify(&self, ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]);

    /// State of one worker of this logic (a per-worker cache), or None (the
    /// default): the logic needs none. Called on the control path when the
    /// logic is installed, once per worker (may allocate, map memory); the
    /// object is that worker's alone and goes to every
    /// [`classify_with`](Logic::classify_with) of its batches until the
    /// logic is replaced, when the worker drops it.
    fn worker_state(&self) -> Option<WorkerState> {
        None
    }

    /// [`classify`](Logic::classify) by a worker that holds `state`, an
    /// object [`worker_state`](Logic::worker_state) made (of this logic,
    /// normally; a logic handed another type's should classify without
    /// it). Same contract as `classify`: no allocation, no blocking. The
    /// default ignores the state.
    #[inline]
    fn classify_with(
        &self,
        _state: &mut (dyn Any + Send),
        ctx: &Ctx,
        ingress: PortId,
        pkts: &mut Pkts,
        verdicts: &mut [Verdict],
    ) {
        self.classify(ctx, ingress, pkts, verdicts)
    }

    /// Members of group `g`, or an empty slice if there is no such group.
    fn group_members(&self, _g: GroupId) -> &[PortId] {
        &[]
    }

    /// Runs a control command (add an entry, show the table...). Control
    /// path: may allocate; must not stop the data path.
    fn command(
        &self,
        cmd: &str,
        _args: &serde_json::Value,
    ) -> Result<serde_json::Value, CommandError> {
        Err(CommandError(format!(
            "logic {} has no command {cmd:?}",
            self.name()
        )))
    }

    /// Names of the commands `command` understands, with one-line help.
    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// A port was removed: forget state that points at it.
    fn port_removed(&self, _port: PortId) {}

    /// The logic's punt queue, if it punts frames to the control plane
    /// (None, the default: it does not). The logic makes it from its
    /// configuration ([`Punt::new`]) and pushes into it from `classify`
    /// (the push's [`DropReason`] is the frame's verdict); the control
    /// plane takes the running logic's from the switch
    /// ([`crate::Switch::punt`]) and pops. Called on the control path.
    fn punt(&self) -> Option<std::sync::Arc<Punt>> {
        None
    }
}

/// A logic shared with a control plane that keeps a typed handle on it
/// (the `logic` crate's table builds `flows` so, for turnoutd's OpenFlow
/// agent): the fabric runs the very instance the handle reaches.
impl<T: Logic + ?Sized> Logic for std::sync::Arc<T> {
    fn name(&self) -> &'static str {
        (**self).name()
    }

    #[inline]
    fn classify(&self, ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        (**self).classify(ctx, ingress, pkts, verdicts)
    }

    fn worker_state(&self) -> Option<WorkerState> {
        (**self).worker_state()
    }

    #[inline]
    fn classify_with(
        &self,
        state: &mut (dyn Any + Send),
        ctx: &Ctx,
        ingress: PortId,
        pkts: &mut Pkts,
        verdicts: &mut [Verdict],
    ) {
        (**self).classify_with(state, ctx, ingress, pkts, verdicts)
    }

    fn group_members(&self, g: GroupId) -> &[PortId] {
        (**self).group_members(g)
    }

    fn command(
        &self,
        cmd: &str,
        args: &serde_json::Value,
    ) -> Result<serde_json::Value, CommandError> {
        (**self).command(cmd, args)
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        (**self).commands()
    }

    fn port_removed(&self, port: PortId) {
        (**self).port_removed(port)
    }

    fn punt(&self) -> Option<std::sync::Arc<Punt>> {
        (**self).punt()
    }
}

//! Switching logics.
pub use fabric::{Ctx, Logic, Verdict};

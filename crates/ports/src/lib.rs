//! Port backends.

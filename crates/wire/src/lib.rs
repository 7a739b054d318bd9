//! Zero-copy header views (filled in by the wire work).

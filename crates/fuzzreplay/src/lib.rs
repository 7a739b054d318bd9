//! Test-only: the corpus replay of the fuzz targets lives in
//! `tests/corpus.rs` (docs/fuzzing.md; `make fuzz-replay`). This library is
//! empty.
#![warn(missing_docs)]

//! Shared set-up for botgate's benchmarks (the benchmarks themselves are the `[[bench]]`
//! targets beside this file).

pub use botgate_tests::mix::realistic_mix;

//! Pure functions over measured rows: the peak, the collapse and the knee of the curve
//! ([`curve`]), the best pool ([`pool`]), E's paired rounds and auto timeline ([`adaptive`]),
//! and the soak's verdict ([`soak`]). No I/O; unit-tested on hand-made rows.

#[cfg(feature = "proxy")]
pub mod adaptive;
pub mod curve;
pub mod pool;
pub mod soak;

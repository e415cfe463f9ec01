//! Pure functions over measured rows: the peak, the collapse and the knee of the curve
//! ([`curve`]), the best pool and the recommended one ([`pool`]), E's paired rounds and auto
//! timeline ([`adaptive`]), F's goal ([`admission`]) and the soak's verdict ([`soak`]). No I/O;
//! unit-tested on hand-made rows.

pub mod adaptive;
pub mod admission;
pub mod curve;
pub mod pool;
pub mod soak;

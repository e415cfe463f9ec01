//! Pure functions over measured rows: the peak, the collapse and the knee of the curve
//! ([`curve`]), the best pool and the recommended one ([`pool`]), E's paired rounds and auto
//! timeline ([`adaptive`]), F's goal ([`admission`]), the relay-cost goal against
//! HAProxy ([`relay_cost`]) and the soak's verdict ([`soak`]). No I/O; unit-tested on
//! hand-made rows.

pub mod adaptive;
pub mod admission;
pub mod curve;
pub mod pool;
pub mod relay_cost;
pub mod soak;
pub mod sysbench;
pub mod sysbench_goals;

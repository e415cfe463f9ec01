//! The value types of the TOML file that `FileConfig` (generated in `settings.rs`) is built
//! from; `read.rs` reads the file.

use std::fmt;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

/// A TOML scalar (string, integer, float or boolean) kept as text, so that every setting is
/// parsed by the same code whether it came from the file, the environment or a flag.
/// `pool_size = 8` and `pool_size = "8"` are therefore the same.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar(pub String);

impl<'de> Deserialize<'de> for Scalar {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Scalar;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string, number or boolean")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Scalar, E> {
                Ok(Scalar(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// One `[[users]]` or `[[admin_users]]` table. `password` is optional here so that a missing
/// one is reported by validation together with every other problem.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileUser {
    pub name: String,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub auth_plugin: Option<String>,
    #[serde(default)]
    pub backend_user: Option<String>,
    #[serde(default)]
    pub backend_password: Option<String>,
    /// Per-user limits (0: none; unset: max_user_client_connections / max_user_concurrency).
    #[serde(default)]
    pub max_client_connections: Option<u32>,
    #[serde(default)]
    pub max_concurrency: Option<u32>,
}

//! The TOML file: reading it and the types `FileConfig` (generated in `settings.rs`) is built from.

use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;

pub use super::settings::FileConfig;
use super::ConfigError;

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
}

/// Parses TOML text; `origin` names the source in the error.
pub fn parse(text: &str, origin: &Path) -> Result<FileConfig, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::Parse {
        path: origin.to_path_buf(),
        message: e.to_string(),
    })
}

/// Reads and parses a config file. Also reports whether it holds a plaintext password, so
/// `Config::warnings` can flag a world-readable file with secrets in it.
pub fn read(path: &Path) -> Result<(FileConfig, bool), ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file = parse(&text, path)?;
    let plaintext = has_plaintext_password(&file);
    Ok((file, plaintext))
}

fn has_plaintext_password(file: &FileConfig) -> bool {
    let plain = |p: &Option<String>| {
        p.as_deref()
            .is_some_and(|p| !p.is_empty() && !super::Secret::new(p.to_string()).is_native_hash())
    };
    let mut users = file.users.iter().chain(file.admin_users.iter()).flatten();
    file.backend_password
        .as_ref()
        .is_some_and(|p| !p.0.is_empty())
        || users.any(|u| plain(&u.password) || plain(&u.backend_password))
}

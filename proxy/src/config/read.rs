//! Reading the TOML file into a `FileConfig` (declared in `settings.rs`).

use std::path::Path;

use super::settings::FileConfig;
use super::ConfigError;

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

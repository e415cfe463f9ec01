//! The command line. Every setting has a flag and an env var (clap reads `SLUICE_*` itself, so
//! a flag beats its env var); the scalar ones come from the settings table via `SettingArgs`.

use std::path::PathBuf;

use super::settings::{SettingArgs, LIST_SETTINGS};

/// `sluice [flags]`. Parse with `Cli::parse()` (clap) or `Cli::try_parse_from(args)` in tests.
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(
    name = "sluice",
    version,
    about = "A transparent MySQL connection-pooling proxy"
)]
pub struct Cli {
    #[arg(long, env = "SLUICE_CONFIG", value_name = "path", help = LIST_SETTINGS[0].description)]
    pub config: Option<PathBuf>,

    /// Validate the configuration, print it with secrets masked, and exit.
    #[arg(long)]
    pub check_config: bool,

    /// Print the settings reference (docs/config.md) and exit.
    #[arg(long)]
    pub print_config_docs: bool,

    /// Print a commented example config file (sluice.example.toml) and exit.
    #[arg(long)]
    pub print_example_config: bool,

    #[arg(long = "user", env = "SLUICE_USERS", value_delimiter = ',', value_name = "NAME:PASSWORD",
          help = LIST_SETTINGS[1].description)]
    pub users: Vec<String>,

    #[arg(long = "admin-user", env = "SLUICE_ADMIN_USERS", value_delimiter = ',',
          value_name = "NAME:PASSWORD", help = LIST_SETTINGS[2].description)]
    pub admin_users: Vec<String>,

    #[arg(long = "server", env = "SLUICE_SERVERS", value_delimiter = ',',
          value_name = "host:port", help = LIST_SETTINGS[3].description)]
    pub servers: Vec<String>,

    #[command(flatten)]
    pub settings: SettingArgs,
}

/// Flags that are actions, not settings: they have no env var and no settings row.
pub const ACTION_FLAGS: &[&str] = &[
    "--check-config",
    "--print-config-docs",
    "--print-example-config",
    "--help",
    "--version",
];

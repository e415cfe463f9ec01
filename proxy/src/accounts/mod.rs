//! Accounts from the server (`auth_source = server | both`): applications log in to sluice
//! with their own server accounts and passwords, and sluice logs in to the backend as the
//! same account with the credential their login proved. No list to keep in sync.
//!
//! - [`row`]: one `user@host` row of the account table (MariaDB `mysql.global_priv`, MySQL
//!   `mysql.user`): plugins, stored hashes, lock and expiry.
//! - [`host`]: host patterns (`%`, `_`, IPs, netmasks) and the server's order of them;
//!   [`pick`]: the row the server picks for a user at an address (anonymous users too).
//! - [`verify`]: the per-plugin check of a proof, and the backend credential it yields;
//!   [`sha_crypt`]: caching_sha2_password's stored `$A$005$` hash.
//! - [`login`]: the rules of a login in the server's order, and each refusal's ERR.
//! - [`directory`]: the cache per account (TTL, negative entries, refresh on a failed
//!   verify, single-flight reads, the credentials for backend logins).
//! - [`loader`]: the SQL and parsing of a read, behind the [`loader::TableReader`] that
//!   `conn::account_table` implements over a backend connection as `auth_user`.
//!
//! Everything but the directory's reads is pure. The login path (`conn::client`) calls
//! [`directory::Directory::lookup`], [`login::plan`], [`verify::verify`] and [`login::admit`].

pub mod directory;
pub mod host;
pub mod loader;
pub mod login;
pub mod pick;
pub mod row;
pub mod sha_crypt;
pub mod verify;

pub use directory::{Account, Directory};
pub use loader::{LoadError, ServerView, TableReader};
pub use login::{Ask, Plan, Refusal, RefusalKind};

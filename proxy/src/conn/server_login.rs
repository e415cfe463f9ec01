//! The client side of a login to a server account (`auth_source = server | both`), for the
//! handshake and COM_CHANGE_USER: which plugin to ask for ([`Principal`]), then the proof
//! checked by `accounts` (`login::plan`, `verify::verify`, `login::admit`). A refusal re-reads
//! the account once (the directory limits that to once a second), so an ALTER USER, an
//! unlock or a DROP USER is seen at the next login.

use std::net::IpAddr;
use std::sync::Arc;

use super::handshake_state::HandshakeContext;
use super::sha2_login::Sha2Outcome;
use super::{Error, PacketStream};
use crate::accounts::host::ClientHost;
use crate::accounts::login::{admit, plan, Ask, Plan, Refusal};
use crate::accounts::verify::{verify, Proof};
use crate::accounts::{Account, LoadError};
use crate::config::{AuthPluginName, Config, UserConfig};
use crate::protocol::auth;

/// Who a login names.
pub enum Principal {
    /// A user of the `users` list.
    Listed(UserConfig),
    /// An account read from the server.
    Server { name: String, account: Account },
    /// No such user where sluice looks.
    Unknown,
    /// The account table cannot be read and no fresh copy of the name is cached.
    Unavailable(LoadError),
}

/// What the client proved so far about a server account.
enum Held {
    /// A mysql_native_password answer to the login's nonce.
    Native(Vec<u8>),
    /// The password itself.
    Cleartext(Vec<u8>),
}

impl Principal {
    /// The plugin to ask the client for.
    pub fn plugin(&self, config: &Config, client: Option<IpAddr>) -> &'static str {
        let default = plugin_name(config.default_auth_plugin);
        match self {
            Principal::Listed(u) => u.auth_plugin.map(plugin_name).unwrap_or(default),
            Principal::Server { name, account } => {
                match client_host(account, client).map(|c| plan(account, name, &c)) {
                    Some(Plan::Verify { ask: Ask::Sha2, .. }) => auth::CACHING_SHA2,
                    Some(Plan::Verify {
                        ask: Ask::Native, ..
                    }) => auth::NATIVE,
                    _ => default,
                }
            }
            Principal::Unknown | Principal::Unavailable(_) => default,
        }
    }
}

pub fn plugin_name(p: AuthPluginName) -> &'static str {
    match p {
        AuthPluginName::Native => auth::NATIVE,
        AuthPluginName::CachingSha2 => auth::CACHING_SHA2,
    }
}

fn client_host(account: &Account, ip: Option<IpAddr>) -> Option<ClientHost> {
    ip.map(|ip| ClientHost::at(ip, account.server.resolves_names))
}

impl HandshakeContext {
    /// Who `name` is: the list first (when auth_source reads it), then the server.
    pub async fn principal(&self, name: &[u8], config: &Arc<Config>) -> Principal {
        if let Some(u) = config.find_user(name) {
            return Principal::Listed(u.clone());
        }
        if !config.auth_source().uses_server() {
            return Principal::Unknown;
        }
        let Ok(name) = std::str::from_utf8(name) else {
            return Principal::Unknown;
        };
        match self.accounts.lookup(name, config).await {
            Ok(account) => Principal::Server {
                name: name.to_string(),
                account,
            },
            Err(e) => Principal::Unavailable(e),
        }
    }

    /// The login of a server account: `plugin` is what the client answered with over
    /// `nonce` (`response`). Refusals re-read the account once and try again.
    #[allow(clippy::too_many_arguments)]
    pub async fn server_login(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        (name, mut account): (String, Account),
        plugin: &[u8],
        nonce: &[u8],
        response: &[u8],
        config: &Arc<Config>,
    ) -> Result<Result<UserConfig, Refusal>, Error> {
        let ip = stream.peer_addr().map(|a| a.ip());
        let mut held = None;
        let mut refreshed = false;
        loop {
            let Some(client) = client_host(&account, ip) else {
                return Ok(Err(Refusal::AccessDenied));
            };
            let attempt = match plan(&account, &name, &client) {
                Plan::NoRow => Err(Refusal::AccessDenied),
                Plan::Unsupported { row } => {
                    let plugin = row.method().map_or("", |m| m.plugin.name()).to_string();
                    Err(Refusal::Unsupported {
                        account: row.account(),
                        plugin,
                        flavor: account.server.flavor,
                    })
                }
                Plan::Verify { row, method, ask } => {
                    if held.is_none() {
                        // A cleartext proven before for this very hash: the fast path.
                        let known = account
                            .sha2_clear
                            .as_ref()
                            .filter(|(hash, _)| *hash == method.auth)
                            .map(|(_, clear)| clear.expose().as_bytes().to_vec());
                        held = self
                            .prove(stream, seq, known.as_deref(), ask, plugin, nonce, response)
                            .await?;
                    }
                    let proof = match &held {
                        Some(Held::Native(r)) => Proof::Native { nonce, response: r },
                        Some(Held::Cleartext(c)) => Proof::Cleartext(c),
                        None => Proof::Native {
                            nonce,
                            response: &[],
                        },
                    };
                    let checked = if held.is_some() {
                        verify(method, proof)
                    } else {
                        None
                    };
                    match checked {
                        Some(credential) => admit(&account, &name, row, &credential).map(|()| {
                            (credential, (ask == Ask::Sha2).then(|| method.auth.clone()))
                        }),
                        None => Err(Refusal::AccessDenied),
                    }
                }
            };
            match attempt {
                Ok((credential, sha2)) => {
                    self.accounts
                        .record_login(&name, &credential, sha2.as_deref());
                    return Ok(Ok(UserConfig::from_server(&name, credential)));
                }
                Err(refusal) if refreshed => return Ok(Err(self.refused(&name, refusal))),
                Err(refusal) => match self.accounts.refresh(&name, config).await {
                    Some(fresh) => {
                        account = fresh;
                        refreshed = true;
                    }
                    None => return Ok(Err(self.refused(&name, refusal))),
                },
            }
        }
    }

    /// Gets the client's proof for `ask`: its native answer as it is, or the caching_sha2
    /// exchange (fast path with a cleartext proven before for this stored hash). `None`: the
    /// client answered with another plugin, or full authentication was refused.
    #[allow(clippy::too_many_arguments)]
    async fn prove(
        &self,
        stream: &mut PacketStream,
        seq: &mut u8,
        known: Option<&[u8]>,
        ask: Ask,
        plugin: &[u8],
        nonce: &[u8],
        response: &[u8],
    ) -> Result<Option<Held>, Error> {
        match ask {
            Ask::Native if plugin == auth::NATIVE.as_bytes() => {
                Ok(Some(Held::Native(response.to_vec())))
            }
            Ask::Sha2 if plugin == auth::CACHING_SHA2.as_bytes() => {
                // No password: the client sends nothing (or one NUL), and no exchange follows.
                if response.is_empty() || response == [0] {
                    return Ok(Some(Held::Cleartext(Vec::new())));
                }
                Ok(
                    match self
                        .sha2_exchange(stream, seq, nonce, response, known)
                        .await?
                    {
                        Sha2Outcome::Fast => known.map(|k| Held::Cleartext(k.to_vec())),
                        Sha2Outcome::Cleartext(clear) => Some(Held::Cleartext(clear)),
                        Sha2Outcome::Refused => None,
                    },
                )
            }
            _ => Ok(None),
        }
    }

    /// Counts and logs a refusal (an unsupported plugin once per account).
    fn refused(&self, name: &str, refusal: Refusal) -> Refusal {
        if let Refusal::Unsupported {
            account, plugin, ..
        } = &refusal
        {
            self.accounts
                .stats
                .unsupported_plugin
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if self.accounts.first_warning(name) {
                tracing::warn!(
                    account = %account,
                    %plugin,
                    "refusing logins of a server account whose plugin sluice cannot verify; list it in users with its password, or change its plugin"
                );
            }
        }
        refusal
    }
}

#[cfg(test)]
#[path = "server_login_tests.rs"]
mod tests;

//! caching_sha2_password logins of a MySQL 8 account (a `mysql.user` row with a `$A$005$`
//! hash), byte by byte over a real socket: full authentication with the RSA key, then the
//! fast path, a wrong password, and COM_CHANGE_USER's switch to the account's plugin.

use std::sync::atomic::AtomicUsize;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::accounts::loader::{ServerView, TableRead, TableReader};
use crate::accounts::row::{self, Clock, Flavor, MySqlColumns};
use crate::protocol::auth_switch::{FAST_AUTH_OK, PERFORM_FULL_AUTH, REQUEST_PUBLIC_KEY};

/// MySQL 8's stored form of "foobar".
const FOOBAR: &str = "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";

struct MySqlTable(AtomicUsize);

#[async_trait::async_trait]
impl TableReader for MySqlTable {
    async fn read(&self, _: &Config, _: &[String]) -> Result<TableRead, LoadError> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let clock = Clock {
            now_epoch_secs: 1_800_000_000,
            default_lifetime_days: 0,
        };
        let columns = MySqlColumns {
            user: "app8",
            host: "%",
            plugin: "caching_sha2_password",
            auth_hex: FOOBAR,
            account_locked: "N",
            password_expired: "N",
            last_changed: Some(1_700_000_000),
            lifetime_days: None,
            max_user_connections: 0,
        };
        let row = row::from_mysql_user(&columns, clock).expect("a mysql.user row");
        Ok(TableRead {
            rows: vec![row],
            server: Arc::new(ServerView {
                flavor: Flavor::MySql,
                resolves_names: false,
                sluice_host: ClientHost::at("127.0.0.1".parse().unwrap(), false),
                default_lifetime_days: 0,
                service_account: "svc@%".into(),
            }),
        })
    }
}

fn context() -> HandshakeContext {
    HandshakeContext {
        server: Default::default(),
        version_override: None,
        rsa: Default::default(),
        sha2_cache: Default::default(),
        tls: None,
        auth_failures: Default::default(),
        accounts: crate::accounts::Directory::new(Arc::new(MySqlTable(AtomicUsize::new(0)))),
    }
}

async fn pair() -> (PacketStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    (PacketStream::new(server, 1 << 20), client)
}

async fn read_packet(c: &mut TcpStream) -> (u8, Vec<u8>) {
    let mut head = [0u8; 4];
    c.read_exact(&mut head).await.unwrap();
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let mut body = vec![0u8; len];
    c.read_exact(&mut body).await.unwrap();
    (head[3], body)
}

async fn write_packet(c: &mut TcpStream, seq: u8, body: &[u8]) {
    let mut out = vec![body.len() as u8, (body.len() >> 8) as u8, 0, seq];
    out.extend_from_slice(body);
    c.write_all(&out).await.unwrap();
}

/// The client half of full authentication without TLS: PERFORM_FULL_AUTH, then ask for
/// the key and send the password encrypted with it.
async fn client_full_auth(c: &mut TcpStream, nonce: &[u8], password: &[u8]) {
    let (seq, more) = read_packet(c).await;
    assert_eq!(
        more,
        [0x01, PERFORM_FULL_AUTH],
        "perform full authentication"
    );
    write_packet(c, seq + 1, &[REQUEST_PUBLIC_KEY]).await;
    let (seq, key) = read_packet(c).await;
    assert_eq!(key[0], 0x01);
    assert!(key[1..].starts_with(b"-----BEGIN PUBLIC KEY-----"));
    let cipher = auth::rsa_encrypt_password(password, nonce, &key[1..]).unwrap();
    write_packet(c, seq + 1, &cipher).await;
}

async fn login(
    ctx: &HandshakeContext,
    password: &'static [u8],
    fast: bool,
) -> Result<UserConfig, Refusal> {
    let mut config = Config::defaults();
    config.auth_source = Some(crate::config::AuthSource::Server);
    let config = Arc::new(config);
    let (mut server, mut client) = pair().await;
    let nonce = auth::random_nonce();
    let response = auth::sha2_scramble(&nonce, password);
    let Principal::Server { name, account } = ctx.principal(b"app8", &config).await else {
        panic!("a server account");
    };
    assert!(matches!(
        Principal::Server {
            name: name.clone(),
            account: account.clone()
        }
        .plugin(&config, Some("10.1.1.1".parse().unwrap())),
        "caching_sha2_password"
    ));
    let client_side = async {
        if fast {
            assert_eq!(read_packet(&mut client).await.1, [0x01, FAST_AUTH_OK]);
        } else {
            client_full_auth(&mut client, &nonce, password).await;
        }
    };
    let mut seq = 2;
    let server_side = ctx.server_login(
        &mut server,
        &mut seq,
        (name, account),
        auth::CACHING_SHA2.as_bytes(),
        &nonce,
        &response,
        &config,
    );
    let (verdict, ()) = tokio::join!(server_side, client_side);
    verdict.expect("no I/O error")
}

#[tokio::test]
async fn full_authentication_over_rsa_then_the_fast_path() {
    let ctx = context();
    let user = login(&ctx, b"foobar", false)
        .await
        .expect("full authentication");
    assert_eq!(
        (user.name.as_str(), user.password.expose()),
        ("app8", "foobar")
    );
    assert_eq!(user.source, crate::config::UserSource::Server);
    assert_eq!(
        ctx.accounts
            .credential("app8")
            .map(|s| s.expose().to_string())
            .as_deref(),
        Some("foobar")
    );
    // The next login's scramble matches the proven cleartext: FAST_AUTH_OK, no exchange.
    let user = login(&ctx, b"foobar", true).await.expect("fast path");
    assert_eq!(user.password.expose(), "foobar");
}

#[tokio::test]
async fn a_wrong_password_is_refused_after_full_authentication() {
    let ctx = context();
    let refusal = login(&ctx, b"foobaz", false)
        .await
        .expect_err("wrong password");
    assert!(matches!(refusal, Refusal::AccessDenied));
    assert!(ctx.accounts.credential("app8").is_none());
}

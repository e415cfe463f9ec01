//! caching_sha2_password's stored hash: `$A$<rounds / 1000, 3 hex digits>$<20-byte salt><43
//! characters>`, the SHA-256 crypt of the password (Ulrich Drepper's "Unix crypt using
//! SHA-256" scheme) with MySQL's 20-byte salt, which standard sha-crypt implementations cut
//! to 16. The salt may hold any byte but NUL and `$`, so the table is read with HEX().
//!
//! Spec: <https://www.akkadia.org/drepper/SHA-crypt.txt>,
//! <https://dev.mysql.com/doc/dev/mysql-server/latest/page_caching_sha2_authentication_exchanges.html>.

use sha2::{Digest, Sha256};

const PREFIX: &[u8] = b"$A$";
const SALT_LEN: usize = 20;
const DIGEST_LEN: usize = 43;
/// The crypt alphabet (not standard base64's).
const ALPHABET: &[u8; 64] = b"./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A parsed `$A$...` hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredSha2 {
    rounds: u32,
    salt: Vec<u8>,
    digest: Vec<u8>,
}

impl StoredSha2 {
    /// `None` for anything but a well-formed `$A$` hash (e.g. the `$A$005$THISISACOMBINATION...`
    /// of MySQL's locked system accounts parses, but no password matches it).
    pub fn parse(stored: &[u8]) -> Option<StoredSha2> {
        let rest = stored.strip_prefix(PREFIX)?;
        let (count, rest) = (rest.get(..3)?, rest.get(3..)?);
        let count = u32::from_str_radix(std::str::from_utf8(count).ok()?, 16).ok()?;
        let rest = rest.strip_prefix(b"$")?;
        if rest.len() != SALT_LEN + DIGEST_LEN || count == 0 {
            return None;
        }
        Some(StoredSha2 {
            rounds: count.checked_mul(1000)?,
            salt: rest[..SALT_LEN].to_vec(),
            digest: rest[SALT_LEN..].to_vec(),
        })
    }

    /// Whether `password` is the one this hash was made from.
    pub fn verify(&self, password: &[u8]) -> bool {
        let computed = encode(&crypt(password, &self.salt, self.rounds));
        computed.len() == self.digest.len()
            && computed
                .iter()
                .zip(&self.digest)
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// The SHA-256 crypt digest (32 bytes) of `password` with `salt` and `rounds`.
pub fn crypt(password: &[u8], salt: &[u8], rounds: u32) -> [u8; 32] {
    let mut b = Sha256::new();
    b.update(password);
    b.update(salt);
    b.update(password);
    let b = b.finalize();

    let mut a = Sha256::new();
    a.update(password);
    a.update(salt);
    add_repeated(&mut a, &b, password.len());
    let mut n = password.len();
    while n > 0 {
        if n & 1 == 1 {
            a.update(b);
        } else {
            a.update(password);
        }
        n >>= 1;
    }
    let mut a = a.finalize();

    let mut dp = Sha256::new();
    for _ in 0..password.len() {
        dp.update(password);
    }
    let p = repeated(&dp.finalize(), password.len());

    let mut ds = Sha256::new();
    for _ in 0..16 + usize::from(a[0]) {
        ds.update(salt);
    }
    let s = repeated(&ds.finalize(), salt.len());

    for round in 0..rounds {
        let mut c = Sha256::new();
        if round % 2 == 1 {
            c.update(&p);
        } else {
            c.update(a);
        }
        if round % 3 != 0 {
            c.update(&s);
        }
        if round % 7 != 0 {
            c.update(&p);
        }
        if round % 2 == 1 {
            c.update(a);
        } else {
            c.update(&p);
        }
        a = c.finalize();
    }
    a.into()
}

/// `len` bytes of `digest` repeated (the scheme's P and S sequences).
fn repeated(digest: &[u8], len: usize) -> Vec<u8> {
    digest.iter().copied().cycle().take(len).collect()
}

fn add_repeated(h: &mut Sha256, digest: &[u8], len: usize) {
    h.update(repeated(digest, len));
}

/// The 43-character encoding of the 32-byte digest: bytes taken three at a time in the
/// scheme's fixed order, each group written low six bits first.
pub fn encode(d: &[u8; 32]) -> Vec<u8> {
    const GROUPS: [(usize, usize, usize); 10] = [
        (0, 10, 20),
        (21, 1, 11),
        (12, 22, 2),
        (3, 13, 23),
        (24, 4, 14),
        (15, 25, 5),
        (6, 16, 26),
        (27, 7, 17),
        (18, 28, 8),
        (9, 19, 29),
    ];
    let mut out = Vec::with_capacity(DIGEST_LEN);
    let mut put = |value: u32, chars: usize| {
        let mut v = value;
        for _ in 0..chars {
            out.push(ALPHABET[(v & 0x3f) as usize]);
            v >>= 6;
        }
    };
    for (x, y, z) in GROUPS {
        put(
            (u32::from(d[x]) << 16) | (u32::from(d[y]) << 8) | u32::from(d[z]),
            4,
        );
    }
    put((u32::from(d[31]) << 8) | u32::from(d[30]), 3);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Password, salt, rounds, encoded digest.
    type Vector = (&'static [u8], &'static [u8], u32, &'static [u8]);

    /// The scheme's own test vectors (SHA-crypt.txt), salts of at most 16 bytes.
    #[test]
    fn the_specifications_vectors() {
        let cases: [Vector; 3] = [
            (
                b"Hello world!",
                b"saltstring",
                5000,
                b"5B8vYYiY.CVt1RlTTf8KbXBH3hsxY/GNooZaBBGWEc5",
            ),
            (
                b"Hello world!",
                b"saltstringsaltst",
                10000,
                b"3xv.VbSHBb41AL9AvLeujZkZRBAwqFMz2.opqey6IcA",
            ),
            (
                b"we have a short salt string but not a short password",
                b"short",
                77777,
                b"JiO1O3ZpDAxGJeaDIuqCoEFysAe1mZNJRs3pw0KQRd/",
            ),
        ];
        for (password, salt, rounds, want) in cases {
            assert_eq!(encode(&crypt(password, salt, rounds)), want);
        }
    }

    /// A MySQL 8 `authentication_string` for the password "foobar" (its salt holds control
    /// bytes, hence HEX()).
    const FOOBAR: &str = "24412430303524031A69251C34295C4B35167C7F1E5A7B63091349503974624D34504B5A424679354856336868686F52485A736E4A733368786E427575516C73446469496537";

    #[test]
    fn a_mysql_hash_checks_its_password_only() {
        let stored = StoredSha2::parse(&hex(FOOBAR)).expect("parses");
        assert_eq!(stored.rounds, 5000);
        assert!(stored.verify(b"foobar"));
        assert!(!stored.verify(b"foobaR"));
        assert!(!stored.verify(b""));
    }

    #[test]
    fn malformed_hashes_do_not_parse() {
        let good = hex(FOOBAR);
        assert!(StoredSha2::parse(&good[..good.len() - 1]).is_none());
        assert!(StoredSha2::parse(b"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
        assert!(StoredSha2::parse(b"$A$xyz$").is_none());
        assert!(StoredSha2::parse(b"").is_none());
        let locked = b"$A$005$THISISACOMBINATIONOFINVALIDSALTANDPASSWORDTHATMUSTNEVERBRBEUSED";
        let parsed = StoredSha2::parse(locked).expect("well-formed");
        assert!(!parsed.verify(b"") && !parsed.verify(b"THISIS"));
    }
}

//! The value types of the settings for reads on replicas: `read_write_split`,
//! `primary_reads`, `read_your_writes`. `topology::route` uses these same types (config
//! depends on nothing above it, so they live here).

use std::fmt;
use std::str::FromStr;

/// `read_write_split`: may reads go to replicas?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadWriteSplit {
    /// Everything goes to the writer. Default.
    #[default]
    Off,
    On,
}

/// `primary_reads`: may the writer serve reads?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PrimaryReads {
    /// Only read-your-writes fallbacks; with no usable replica, reads wait for one.
    Never,
    /// When no replica is usable. Default.
    #[default]
    Fallback,
    /// Always, competing with the replicas.
    Always,
}

/// `read_your_writes`: how a session's reads see its own writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadYourWrites {
    Off,
    /// Default.
    #[default]
    Session,
    Wait,
}

/// One closed set of words per enum: parse and print from the same table.
macro_rules! words {
    ($ty:ident, $what:literal, $( $variant:ident => $word:literal ),+ ) => {
        impl $ty {
            pub fn as_str(self) -> &'static str {
                match self { $( $ty::$variant => $word, )+ }
            }
        }
        impl FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let t = s.trim();
                $( if t.eq_ignore_ascii_case($word) { return Ok($ty::$variant); } )+
                Err(format!(
                    concat!("{:?} is not a ", $what, "; use one of: {}"),
                    t,
                    [$($word),+].join(", ")
                ))
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

words!(ReadWriteSplit, "read_write_split mode", Off => "off", On => "on");
words!(PrimaryReads, "primary_reads mode", Never => "never", Fallback => "fallback", Always => "always");
words!(ReadYourWrites, "read_your_writes mode", Off => "off", Session => "session", Wait => "wait");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_and_bad_words_name_the_choices() {
        for m in [ReadWriteSplit::Off, ReadWriteSplit::On] {
            assert_eq!(m.to_string().parse::<ReadWriteSplit>(), Ok(m));
        }
        for m in [
            PrimaryReads::Never,
            PrimaryReads::Fallback,
            PrimaryReads::Always,
        ] {
            assert_eq!(m.to_string().parse::<PrimaryReads>(), Ok(m));
        }
        for m in [
            ReadYourWrites::Off,
            ReadYourWrites::Session,
            ReadYourWrites::Wait,
        ] {
            assert_eq!(m.to_string().parse::<ReadYourWrites>(), Ok(m));
        }
        assert_eq!(" ON ".parse::<ReadWriteSplit>(), Ok(ReadWriteSplit::On));
        let e = "sometimes".parse::<PrimaryReads>().unwrap_err();
        assert!(e.contains("never, fallback, always"), "{e}");
    }
}

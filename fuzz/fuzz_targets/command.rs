//! The client command parser: any payload parses to a `Command` or an error, its response
//! kind is defined, and statement-id patching stays inside the payload.
#![no_main]

use libfuzzer_sys::fuzz_target;
use sluice::protocol::{set_stmt_id, Capabilities, ChangeUser, Command};

fuzz_target!(|data: &[u8]| {
    let Ok(command) = Command::parse(data) else {
        return;
    };
    let _ = command.response_kind();
    match command {
        Command::ChangeUser(body) => {
            for caps in [Capabilities::CLIENT_PROTOCOL_41, Capabilities::all()] {
                let _ = ChangeUser::decode(body, caps);
            }
        }
        Command::StmtExecute { stmt_id, .. }
        | Command::StmtClose(stmt_id)
        | Command::StmtReset(stmt_id)
        | Command::StmtFetch { stmt_id, .. }
        | Command::StmtSendLongData { stmt_id, .. } => {
            let mut patched = data.to_vec();
            set_stmt_id(&mut patched, stmt_id.wrapping_add(1)).expect("a parsed statement id");
            let reparsed = Command::parse(&patched).expect("patching keeps the command valid");
            assert_eq!(reparsed.response_kind(), command.response_kind());
        }
        _ => {}
    }
});

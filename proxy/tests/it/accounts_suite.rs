//! The existing integration tests' behaviour with accounts from the server: sluice with no
//! `users` list (`auth_source = server`, harness::config_server_accounts), where the
//! application account logs in with its own name and password and sluice logs in to the
//! backend as that same account with the SHA1(password) its login proved. Each test here runs
//! a representative set of other modules' tests in that variant
//! (`harness::with_accounts_from_server`): core statements and state, the CLI and
//! mysql_async's binary protocol against direct, isolation under load, CONNECTION_ID(), and
//! every driver's transcript against the direct run (COM_CHANGE_USER and COM_RESET_CONNECTION
//! included).

use crate::harness::with_accounts_from_server;

#[test]
fn core_statements_and_session_state_with_accounts_from_the_server() {
    with_accounts_from_server(crate::core::many_clients_share_a_small_pool_and_get_correct_results);
    with_accounts_from_server(crate::core::wrong_password_gets_1045_and_unknown_database_gets_1049);
    with_accounts_from_server(crate::core::a_transaction_keeps_its_backend_until_commit);
    with_accounts_from_server(crate::core::session_variables_are_replayed_not_pinned);
    with_accounts_from_server(crate::core::user_variables_pin_and_never_leak);
    with_accounts_from_server(crate::core::session_state_does_not_leak_to_the_next_client);
    with_accounts_from_server(crate::core::multi_statements_and_procedures_return_every_result_set);
    with_accounts_from_server(crate::core::connection_id_is_sluices_id_on_every_backend);
    with_accounts_from_server(crate::core::prepared_statements_are_shared_without_pinning);
    with_accounts_from_server(crate::core::warnings_and_last_insert_id_follow_the_session);
}

#[test]
fn the_cli_and_mysql_async_match_direct_with_accounts_from_the_server() {
    with_accounts_from_server(crate::clients::mariadb_cli_batch_output_matches_direct);
    with_accounts_from_server(crate::clients::mysql_async_binary_protocol_matches_direct);
    with_accounts_from_server(
        crate::clients::reset_connection_clears_user_variables_and_session_state,
    );
}

#[test]
fn isolation_and_identity_with_accounts_from_the_server() {
    with_accounts_from_server(
        crate::isolation::isolation_stress_200_clients_over_p4_nothing_crosses_sessions,
    );
    with_accounts_from_server(crate::isolation::warnings_read_by_one_session_never_reach_the_next);
    with_accounts_from_server(crate::identity::connection_id_is_the_clients_id_in_every_form);
}

#[test]
fn every_driver_matches_direct_with_accounts_from_the_server() {
    with_accounts_from_server(crate::drivers::pymysql_sees_the_same_results_as_direct);
    with_accounts_from_server(crate::drivers::mysqlclient_sees_the_same_results_as_direct);
    with_accounts_from_server(
        crate::drivers::mysql_connector_python_sees_the_same_results_as_direct,
    );
    with_accounts_from_server(
        crate::drivers::mysql_connector_python_c_extension_sees_the_same_results_as_direct,
    );
    with_accounts_from_server(crate::drivers::node_mysql2_sees_the_same_results_as_direct);
    with_accounts_from_server(crate::drivers::php_pdo_and_mysqli_see_the_same_results_as_direct);
    with_accounts_from_server(crate::drivers::mariadb_connector_j_sees_the_same_results_as_direct);
    with_accounts_from_server(crate::drivers::mysql_async_sees_the_same_results_as_direct);
}

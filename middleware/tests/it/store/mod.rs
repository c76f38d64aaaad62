//! Store conformance: one set of test functions, run against every backend.
//!
//! Each test is a plain `async fn(&DynStore)` (or `async fn(&Backend)` when it
//! must write what the store never would) in the module of its concern; the
//! `conformance!` list below instantiates it once per backend (`mysql::…` on a
//! fresh MariaDB database, `sharded::…` on three, `postgres::…` on a fresh
//! PostgreSQL database, `sqlite::…` on a fresh temp file), so every backend
//! are held to the same state machine, the same claim/lease rules and the same
//! clock rules (`docs/architecture.md`: States, Storage, Forwarder, Verifier).
//!
//! The state × operation matrix: states are missing, PREPARED, COMMITTED+PENDING,
//! COMMITTED+SENT, COMMITTED+SEND_FAILED, ROLLED_BACK, tombstone and
//! VERIFY_FAILED ([`harness::State`]); every operation test walks all of them,
//! checks the outcome, the row, its version and the audit rows the operation
//! added.

mod alerts;
mod archive;
mod batches;
mod bulk;
mod clock;
mod committed;
mod content;
mod decisions;
mod delivery;
mod flow;
pub(crate) mod harness;
mod headroom;
mod keepalive;
mod ledger;
mod operators;
mod ordering;
mod overdue;
mod partitions;
mod prepare;
mod producers;
mod quarantine;
mod sends;
mod sharding;
mod sizes;
mod sqlite_only;
mod upgrade;
mod verifies;
mod waiting;

/// One `#[tokio::test]` per listed test, each on a fresh backend made by
/// `Backend::$make()` and finished after it; the lists below choose the
/// backends.
macro_rules! on_backend {
    ($make:ident; { $($module:ident: [$($name:ident),* $(,)?]),* $(,)? }) => {$($(
        #[tokio::test]
        async fn $name() {
            let backend = crate::store::harness::Backend::$make().await;
            crate::store::$module::$name(&backend).await;
            backend.finish().await;
        }
    )*)*};
}

/// [`on_backend!`] once per listed backend, in a module named for it.
macro_rules! on_backends {
    ([$($(#[$attr:meta])* $make:ident),* $(,)?]; $tests:tt) => {$(
        $(#[$attr])*
        mod $make {
            on_backend!($make; $tests);
        }
    )*};
}

/// Instantiates every listed test once per backend, as `mysql::<name>`,
/// `sharded::<name>`, `postgres::<name>` and `sqlite::<name>`, whatever
/// module the test function lives in.
macro_rules! conformance {
    ($($tests:tt)*) => {
        on_backends!(
            [
                /// Every conformance test on a fresh MariaDB database.
                mysql,
                /// Every conformance test on three fresh MariaDB databases as
                /// the shards of one store.
                sharded,
                /// Every conformance test on a fresh PostgreSQL database.
                postgres,
                /// Every conformance test on a fresh SQLite file.
                sqlite,
            ];
            { $($tests)* }
        );
    };
}

/// The archive on the backends `--archive` runs on (SQLite keeps
/// deleting without one).
mod archived {
    on_backends!([mysql, sharded, postgres]; {
        archive: [
            retention_archives_every_finished_message_whole_before_it_deletes_it,
            an_archive_that_fails_deletes_nothing_and_alerts_once_per_episode,
            a_message_that_changed_after_it_was_archived_stays_until_archived_again,
        ],
    });
}

/// The archive of a whole time partition (one database: a shard's
/// periods are its own).
mod archived_partitions {
    on_backends!([mysql, postgres]; {
        archive: [a_partition_is_archived_whole_and_marked_without_deleting_a_row],
    });
}

conformance! {
    content: [
        a_long_content_is_kept_apart_and_every_read_finds_it_whole,
        the_move_takes_long_contents_out_of_older_rows_and_then_ends,
        a_claimed_row_whose_content_apart_is_gone_is_quarantined,
    ],
    ledger: [
        a_registration_keeps_its_token_on_update_and_is_listed_rotated_and_deleted,
        a_begin_goes_once_and_a_finished_consumption_is_skipped,
        an_unknown_message_and_a_finish_without_begin_are_told_apart,
        concurrent_begins_of_one_message_give_one_go_per_group,
        failures_are_retried_and_alerted_failing_once_per_message_and_group,
        a_hold_that_runs_out_is_alerted_stuck_once_per_begin_and_taken_over,
        counts_and_lag_follow_each_groups_topics_since_its_registration,
        retention_takes_ledger_rows_with_their_message,
    ],
    flow: [
        each_instances_counts_add_up_per_minute_and_old_minutes_go,
    ],
    waiting: [
        a_waiting_commit_is_parked_once_claimed_by_one_retried_and_settled,
    ],
    ordering: [
        an_ordered_keys_commits_are_sent_one_after_the_other_in_commit_order,
        a_send_failed_head_blocks_its_key_alerts_once_and_a_skip_releases_it,
        a_head_that_fails_with_messages_behind_it_alerts_once,
        a_commit_batch_gives_a_keys_rows_their_seqs_in_batch_order,
        a_batch_of_sent_marks_moves_each_key_on_once,
    ],
    prepare: [
        prepare_of_a_new_key_creates_a_prepared_row_due_after_the_first_check_delay,
        prepare_again_with_the_same_content_returns_the_stored_row_unchanged_in_every_state,
        prepare_again_with_different_content_returns_the_stored_row_with_another_digest_in_every_state,
        message_keys_are_unique_byte_for_byte,
        a_traced_prepare_keeps_its_trace_context_and_its_alert_copies_the_trace_id,
    ],
    decisions: [
        commit_of_an_unknown_message_is_not_found_and_creates_nothing,
        commit_of_a_prepared_message_commits_it_and_claims_it_for_sending,
        a_producer_commit_after_a_reverify_follows_it_in_the_trail,
        commit_of_a_verify_failed_message_commits_it_and_audits_it,
        commit_of_a_committed_message_is_an_idempotent_repeat_in_every_send_state,
        commit_after_rollback_is_a_conflict,
        rollback_of_an_unknown_message_leaves_an_audited_tombstone,
        rollback_of_a_prepared_message_rolls_it_back_and_audits_it,
        rollback_of_a_verify_failed_message_rolls_it_back_and_audits_it,
        rollback_of_a_rolled_back_message_or_tombstone_is_an_idempotent_repeat,
        rollback_after_commit_is_a_conflict_in_every_send_state,
        decide_by_id_of_an_unknown_message_is_not_found_and_leaves_no_tombstone,
        a_check_back_decision_by_id_counts_as_a_verify_attempt,
        verify_failed_transition_applies_only_to_a_prepared_row,
        reverify_transition_applies_only_to_a_verify_failed_row_and_makes_it_due_at_once,
        a_transition_with_a_stale_version_matches_nothing,
        racing_commit_and_rollback_decide_exactly_once,
    ],
    sends: [
        claim_due_sends_takes_only_committed_pending_rows_that_are_due,
        claim_due_sends_skips_claimed_rows_until_a_short_lease_runs_out,
        an_owned_claim_is_taken_by_no_other_owner_until_its_owner_is_released,
        a_fencer_gives_back_only_the_lapsed_claims_it_read_before_its_fence,
        claim_due_sends_takes_at_most_the_limit,
        a_send_claim_takes_the_rows_whose_payloads_fit_its_room,
        a_send_claim_counts_an_unrecorded_length_as_the_largest,
        racing_claimers_never_take_the_same_row,
        mark_sent_matches_only_the_claimed_version_of_a_pending_row,
        mark_sent_with_a_stale_version_matches_nothing,
        a_batch_of_sent_marks_gives_each_row_its_own_partition_and_offset,
        reschedule_send_applies_only_to_a_pending_row,
        postpone_send_reschedules_only_a_pending_row_without_counting_an_attempt,
        mark_send_failed_applies_only_to_a_pending_row_and_audits_it,
        release_sends_makes_only_the_named_pending_claims_due_at_once,
    ],
    verifies: [
        claim_due_verifies_takes_only_prepared_rows_that_are_due,
        claim_due_verifies_skips_claimed_rows_until_a_short_lease_runs_out,
        a_check_back_claim_lasts_each_rows_producer_timeout_plus_the_margin,
        reschedule_verify_applies_only_to_a_prepared_row,
        release_verifies_hands_claims_back_without_counting_an_attempt,
    ],
    batches: [
        concurrent_prepare_batches_of_the_same_keys_in_opposite_orders_create_each_once,
        a_prepare_batch_creates_each_new_key_once_and_returns_the_rows_already_there,
        a_prepare_batch_of_new_keys_returns_each_row_as_stored_in_request_order,
        a_transition_batch_applies_the_guards_that_hold_and_nothing_for_a_stale_one,
        a_transition_batch_of_rows_just_read_returns_each_row_as_stored,
        a_mixed_transition_batch_changes_each_row_as_its_transition_alone_does,
        a_decision_batch_has_the_outcomes_of_deciding_one_by_one,
        a_decision_batch_with_rows_held_has_the_outcomes_of_reading_them,
    ],
    producers: [
        producers_can_be_created_found_updated_and_deleted,
        set_producer_token_replaces_the_hash_of_an_existing_producer_only,
    ],
    quarantine: [
        an_unreadable_row_is_quarantined_and_the_rest_of_its_send_claim_goes_ahead,
        an_unreadable_row_is_quarantined_and_the_rest_of_its_verify_claim_goes_ahead,
    ],
    delivery: [
        a_commit_before_deliver_at_makes_it_due_then_unclaimed_and_after_it_at_once,
        a_batch_of_commits_with_the_rows_at_hand_follows_the_same_rule,
        a_delayed_send_is_overdue_counted_from_its_deliver_at,
        send_now_applies_only_to_a_committed_send_waiting_for_its_time,
        a_prepare_batch_stores_each_delivery_time,
    ],
    overdue: [
        flag_overdue_finds_each_pending_send_once_and_touches_nothing_else,
        flag_overdue_finds_each_undecided_prepare_once_and_touches_nothing_else,
        flag_overdue_takes_at_most_the_limit_and_the_rest_next_time,
        a_message_alerted_verify_overdue_is_alerted_send_overdue_after_its_commit,
        a_redelivered_message_is_alerted_send_overdue_again_counted_from_the_redeliver,
        a_re_verified_message_is_alerted_verify_overdue_again_counted_from_the_re_verify,
    ],
    operators: [
        listed_messages_are_filtered_newest_first_and_paged_without_skips,
        the_summary_counts_each_producers_states_and_names_its_oldest_waits,
        every_registration_is_listed_by_biz_id,
        redeliver_applies_only_to_a_send_failed_row_and_makes_it_due_with_no_attempts,
        check_attempts_are_kept_oldest_first_up_to_the_newest_fifty,
        retention_deletes_only_finished_messages_with_their_history,
    ],
    clock: [
        times_come_from_the_database_clock_in_utc_with_millisecond_precision,
    ],
    sizes: [
        the_tables_sizes_count_the_rows_written_and_the_oldest_message_is_the_first,
    ],
    bulk: [
        a_bulk_redeliver_changes_every_send_failed_row_of_the_filter_once_in_chunks,
        a_bulk_reverify_changes_every_verify_failed_row_of_the_filter_once_in_chunks,
        a_claim_from_before_a_bulk_redeliver_matches_nothing,
    ],
    alerts: [
        a_verify_failed_transition_writes_its_alert_and_a_lost_one_writes_none,
        a_batch_of_verify_failed_transitions_writes_one_alert_per_row,
        mark_send_failed_writes_its_alert_and_a_lost_one_writes_none,
        a_quarantine_and_an_overdue_flag_each_write_one_alert,
        claim_due_alerts_skips_claimed_ones_until_a_short_lease_runs_out,
        a_delivered_alert_is_settled_and_a_retry_counts_and_waits,
        without_a_webhook_due_alerts_are_settled_and_never_pile_up,
        listed_alerts_are_newest_first_and_paged_without_skips,
        retention_deletes_settled_alerts_and_never_a_pending_one,
    ],
}

/// Time partitions, on the stores that have them (issue 60).
mod time_partitions {
    on_backends!([mysql, sharded, postgres]; {
        partitions: [
            a_partition_boundary_is_crossed_with_messages_in_every_state,
            a_partition_held_by_a_waiting_message_keeps_it_and_goes_once_it_is_settled,
            a_dropped_partition_takes_the_rows_hanging_off_its_messages,
            with_an_archive_a_partition_goes_only_once_it_is_archived,
            two_instances_keep_the_partitions_together,
        ],
    });
    /// A drop of one database's partitions, cut off half way.
    mod cut_off {
        on_backends!([mysql, postgres]; {
            partitions: [
                a_drop_cut_off_between_two_tables_is_finished_by_the_next_round,
            ],
        });
    }
    on_backends!([sqlite]; {
        partitions: [
            sqlite_is_not_partitioned,
        ],
    });
}

/// Tests of a row another claimer holds locked (`FOR UPDATE SKIP LOCKED`),
/// on MariaDB, shards and PostgreSQL only: SQLite locks no rows (its claim is one
/// statement under the database's one write lock), so there is nothing to
/// skip and the tests do not run on it, rather than pass there having
/// checked nothing.
mod row_locks {
    on_backends!([mysql, sharded, postgres]; {
        alerts: [
            claim_due_alerts_skips_an_alert_another_claimer_holds_locked,
        ],
    });
}

/// A table partitioned by time is measured as the sum of its partitions,
/// on MariaDB (and the shards, summed again) and PostgreSQL: SQLite has no
/// partitions.
mod partitioned_sizes {
    on_backends!([mysql, sharded, postgres]; {
        sizes: [
            a_partitioned_tables_size_is_the_sum_of_its_partitions,
        ],
    });
}

/// Messages created COMMITTED in one step, on MariaDB and PostgreSQL: the
/// stores that offer it (`INSERT … RETURNING`); the others answer None
/// (nothing written), and their callers prepare and commit, which the rest
/// of this suite holds them to. The sharded store passes a one-shard batch on to
/// its shard: the relay's tests hold it to that.
mod committed_in_one_step {
    on_backends!([mysql, postgres]; {
        committed: [
            a_committed_batch_is_created_due_at_once_claimed_and_audited_once,
            a_committed_batch_with_a_key_that_exists_writes_nothing,
            committed_rows_of_an_ordered_key_take_their_seqs_in_batch_order,
            a_committed_row_with_a_delivery_time_is_due_then_and_claimed_by_nobody,
        ],
    });

    /// Without RETURNING (MySQL) the store says None and writes nothing.
    #[tokio::test]
    async fn without_returning_nothing_is_written_and_the_caller_is_told() {
        let backend = crate::store::harness::Backend::mysql_without_returning().await;
        let batch = [trustmsg::store::NewCommitted {
            message: crate::store::harness::new_message("c1", std::time::Duration::from_secs(1)),
            actor: trustmsg::store::Actor::Outbox,
            reason: "relayed".into(),
        }];
        let created = backend
            .insert_committed_batch(&batch, std::time::Duration::from_secs(60))
            .await
            .unwrap();
        assert_eq!(created, None);
        assert_eq!(
            backend
                .find_message(crate::store::harness::BIZ, "c1")
                .await
                .unwrap(),
            None
        );
        backend.finish().await;
    }
}

/// The prepare and batch tests again on MariaDB used without `INSERT …
/// RETURNING`, as on MySQL: the read-back paths must give the same rows.
mod mysql_without_returning {
    on_backend!(mysql_without_returning; {
        content: [
            a_long_content_is_kept_apart_and_every_read_finds_it_whole,
        ],
        ordering: [
            a_commit_batch_gives_a_keys_rows_their_seqs_in_batch_order,
        ],
        prepare: [
            prepare_of_a_new_key_creates_a_prepared_row_due_after_the_first_check_delay,
            prepare_again_with_the_same_content_returns_the_stored_row_unchanged_in_every_state,
            prepare_again_with_different_content_returns_the_stored_row_with_another_digest_in_every_state,
            message_keys_are_unique_byte_for_byte,
        ],
        batches: [
            a_prepare_batch_creates_each_new_key_once_and_returns_the_rows_already_there,
            a_prepare_batch_of_new_keys_returns_each_row_as_stored_in_request_order,
            a_transition_batch_of_rows_just_read_returns_each_row_as_stored,
            a_decision_batch_has_the_outcomes_of_deciding_one_by_one,
            a_decision_batch_with_rows_held_has_the_outcomes_of_reading_them,
        ],
        delivery: [
            a_prepare_batch_stores_each_delivery_time,
            a_batch_of_commits_with_the_rows_at_hand_follows_the_same_rule,
        ],
    });
}

/// Migrations on MySQL wait for a lock of their own database's: two
/// instances of one deployment never migrate at once, and deployments in
/// other databases of the server never wait for each other (a user lock is
/// server-wide; a single name made every test's start-up queue behind every
/// other's migration, 6.5 s once in CI).
mod migration_lock {
    use std::time::Duration;

    use trustmsg_tests as common;

    /// Takes the lock `migrate` takes on `db`, on a connection of its own.
    async fn hold_migration_lock(db: &common::TestDb) -> sqlx::pool::PoolConnection<sqlx::MySql> {
        let pool = db.pool_of(1).await;
        let mut conn = pool.acquire().await.unwrap();
        let held: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK(CONCAT('trustmsg_migrate_', SHA1(DATABASE())), 0)")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
        assert_eq!(held, Some(1), "the lock is free before the test");
        conn
    }

    #[tokio::test]
    async fn a_migration_waits_for_its_own_databases_lock_and_never_for_anothers() {
        let held_db = common::TestDb::create().await;
        let other_db = common::TestDb::create().await;
        let mut holder = hold_migration_lock(&held_db).await;

        let other = trustmsg::store::connect(&other_db.database_url())
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), other.migrate())
            .await
            .expect("another database's migration lock does not hold this one up")
            .unwrap();

        let held = trustmsg::store::connect(&held_db.database_url())
            .await
            .unwrap();
        let waiting = tokio::spawn(async move { held.migrate().await });
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(!waiting.is_finished(), "migrated while its lock was held");
        sqlx::query("SELECT RELEASE_LOCK(CONCAT('trustmsg_migrate_', SHA1(DATABASE())))")
            .execute(&mut *holder)
            .await
            .unwrap();
        tokio::time::timeout(Duration::from_secs(20), waiting)
            .await
            .expect("migrates once the lock is free")
            .unwrap()
            .unwrap();
        drop(holder);
        held_db.drop_db().await;
        other_db.drop_db().await;
    }
}

//! `appliance billing report`: every account's credits and charges within a time range,
//! as CSV, read from the SQLite database of the data directory (found from the same
//! configuration as `appliance serve`, like `appliance backup`). The file is opened
//! read-only in one snapshot (`store::read_ledger`), so the appliance may keep serving.
//!
//! The columns (`docs/operators.md`, "Billing report"), one line per ledger row and, after
//! each account's rows, one `total` line:
//!
//! | column | `entry` line | `total` line |
//! |---|---|---|
//! | `record` | `entry` | `total` |
//! | `account_id`, `account_name` | the account | the account |
//! | `entry_id` | the ledger row's id | empty |
//! | `time_unix`, `time_utc` | when (Unix seconds; RFC 3339, UTC) | empty |
//! | `kind` | `initial`, `top_up` or `charge` | empty |
//! | `operation` | the endpoint charged (`add_group`, `lit_action`, …) or the credit's source | empty |
//! | `action_cid` | the action a `lit_action` charge paid for | empty |
//! | `request_id` | the `X-Request-Id` of the request behind it | empty |
//! | `payment_intent_id` | the Stripe payment intent of a top-up | empty |
//! | `credit_cents` | cents credited (0 for a charge) | the account's credits in the range |
//! | `charge_cents` | cents charged (0 for a credit) | the account's charges in the range |
//! | `balance_after_cents` | the balance after the row | the balance after the account's last row in the range |
//!
//! Fields are quoted as RFC 4180 says when they hold a comma, a quote or a line break;
//! text a client chose (the account name, the operation) that starts with `=`, `+`, `-`,
//! `@`, a tab or a carriage return is prefixed with `'`, so that a spreadsheet does not
//! run it as a formula.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError, StoreEngine};
use crate::store::backup::utc;
use crate::store::{AccountId, AccountLedgerEntry, LedgerRange, StoreError, read_ledger};

/// The report's header line.
pub const HEADER: &str = "record,account_id,account_name,entry_id,time_unix,time_utc,kind,operation,action_cid,request_id,payment_intent_id,credit_cents,charge_cents,balance_after_cents";

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportCmdError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(
        "store.engine is \"postgres\": `appliance billing report` reads the SQLite file only (PostgreSQL ledger rows are MACed by keyservice and are read through the API: GET /core/v1/billing/usage)"
    )]
    Postgres,
    #[error("--from ({from}) is after --to ({to})")]
    FromAfterTo { from: String, to: String },
    #[error("{0} exists; pass --force to replace it")]
    OutExists(PathBuf),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl ReportCmdError {
    /// The process's exit status: 2 for a configuration or usage error, 3 when a check
    /// refused (nothing was written), 1 when reading or writing failed.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Config(_) | Self::FromAfterTo { .. } => 2,
            Self::Postgres | Self::OutExists(_) => 3,
            Self::Store(StoreError::NotFound(_) | StoreError::SchemaTooNew { .. }) => 3,
            Self::Store(StoreError::Unavailable(msg)) if msg.contains("schema version") => 3,
            Self::Store(_) | Self::Write { .. } => 1,
        }
    }
}

/// What `appliance billing report` was asked for.
#[derive(Debug, Clone)]
pub struct ReportArgs {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    /// Unix seconds, inclusive.
    pub from: i64,
    /// Unix seconds, exclusive.
    pub to: i64,
    pub account: Option<i64>,
    /// Standard output when `None`.
    pub out: Option<PathBuf>,
    pub force: bool,
}

/// What a report wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportSummary {
    pub entries: u64,
    pub accounts: u64,
}

impl ReportSummary {
    pub fn line(&self, out: &Path) -> String {
        format!(
            "wrote {} ledger row(s) of {} account(s) to {}",
            self.entries,
            self.accounts,
            out.display()
        )
    }
}

/// A time as `--from` and `--to` take it: Unix seconds (`1764547200`), a UTC date
/// (`2025-12-01`, its midnight) or a UTC time (`2025-12-01T12:00:00Z`).
pub fn parse_time(text: &str) -> Result<i64, String> {
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text
            .parse::<i64>()
            .map_err(|_| format!("{text} is too large for Unix seconds"));
    }
    let bad = || {
        format!(
            "{text:?} is not a time: give Unix seconds, a UTC date (2025-12-01) or a UTC time (2025-12-01T12:00:00Z)"
        )
    };
    let (date, time) = match text.split_once(['T', 't']) {
        Some((date, time)) => (date, Some(time)),
        None => (text, None),
    };
    let number = |s: &str, len: usize| -> Result<i64, String> {
        if s.len() == len && s.bytes().all(|b| b.is_ascii_digit()) {
            s.parse().map_err(|_| bad())
        } else {
            Err(bad())
        }
    };
    let parts: Vec<&str> = date.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(bad());
    };
    let (year, month, day) = (number(y, 4)?, number(m, 2)?, number(d, 2)?);
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let lengths = [
        31,
        if leap(year) { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if year < 1970 || !(1..=12).contains(&month) {
        return Err(bad());
    }
    let month_index = usize::try_from(month - 1).map_err(|_| bad())?;
    if day < 1 || day > lengths[month_index] {
        return Err(bad());
    }
    let mut days: i64 = (1970..year).map(|y| if leap(y) { 366 } else { 365 }).sum();
    days += lengths[..month_index].iter().sum::<i64>() + day - 1;
    let seconds = match time {
        None => 0,
        Some(time) => {
            let time = time
                .strip_suffix(['Z', 'z'])
                .ok_or_else(|| format!("{}: a time must end in Z (UTC)", bad()))?;
            let parts: Vec<&str> = time.split(':').collect();
            let [h, min, s] = parts.as_slice() else {
                return Err(bad());
            };
            let (h, min, s) = (number(h, 2)?, number(min, 2)?, number(s, 2)?);
            if h > 23 || min > 59 || s > 59 {
                return Err(bad());
            }
            h * 3600 + min * 60 + s
        }
    };
    Ok(days * 86_400 + seconds)
}

/// Where the SQLite database is (`<data_dir>/state.db`), as `appliance backup` finds it.
fn database(config: Option<&Path>, data_dir: Option<PathBuf>) -> Result<PathBuf, ReportCmdError> {
    let config = Config::load(config)?;
    if config.store.engine == StoreEngine::Postgres {
        return Err(ReportCmdError::Postgres);
    }
    Ok(data_dir
        .unwrap_or(config.data_dir)
        .join(crate::store::config::SQLITE_FILE))
}

/// `appliance billing report`: writes the CSV to `args.out` (which must not exist unless
/// `force`) or to `stdout`.
pub fn run(args: &ReportArgs, stdout: &mut dyn Write) -> Result<ReportSummary, ReportCmdError> {
    if args.from > args.to {
        return Err(ReportCmdError::FromAfterTo {
            from: utc(args.from),
            to: utc(args.to),
        });
    }
    let db = database(args.config.as_deref(), args.data_dir.clone())?;
    let range = LedgerRange {
        from: Some(args.from),
        to: Some(args.to),
    };
    let account = args.account.map(AccountId);
    let Some(out) = &args.out else {
        return report(&db, range, account, stdout, "standard output");
    };
    let shown = out.display().to_string();
    let io = |source| ReportCmdError::Write {
        path: shown.clone(),
        source,
    };
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if args.force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let file = match options.open(out) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(ReportCmdError::OutExists(out.clone()));
        }
        Err(e) => return Err(io(e)),
    };
    let mut writer = std::io::BufWriter::new(file);
    let written = report(&db, range, account, &mut writer, &shown).and_then(|summary| {
        let file = writer.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        Ok(summary)
    });
    if written.is_err() {
        // Never leave a partial report behind under the name asked for.
        let _ = std::fs::remove_file(out);
    }
    written
}

/// Writes the report of `db` to `out`.
pub fn report(
    db: &Path,
    range: LedgerRange,
    account: Option<AccountId>,
    out: &mut dyn Write,
    shown: &str,
) -> Result<ReportSummary, ReportCmdError> {
    let io = |source| ReportCmdError::Write {
        path: shown.to_owned(),
        source,
    };
    writeln!(out, "{HEADER}").map_err(io)?;
    let mut summary = ReportSummary::default();
    let mut current: Option<Totals> = None;
    read_ledger(db, range, account, |row: AccountLedgerEntry| {
        if current.as_ref().is_some_and(|t| t.account != row.account)
            && let Some(done) = current.take()
        {
            done.write(out).map_err(io)?;
        }
        let totals = current.get_or_insert_with(|| {
            summary.accounts += 1;
            Totals {
                account: row.account,
                name: row.account_name.clone(),
                credits: 0,
                charges: 0,
                balance: 0,
            }
        });
        let e = &row.entry;
        let (credit, charge) = if e.amount_cents >= 0 {
            (e.amount_cents.unsigned_abs(), 0)
        } else {
            (0, e.amount_cents.unsigned_abs())
        };
        totals.credits += credit;
        totals.charges += charge;
        totals.balance = e.balance_after;
        summary.entries += 1;
        let fields = [
            "entry".to_owned(),
            row.account.0.to_string(),
            text(&row.account_name),
            e.id.to_string(),
            e.created_at.to_string(),
            utc(e.created_at),
            e.kind.as_str().to_owned(),
            text(&e.operation),
            text(e.action_cid.as_deref().unwrap_or("")),
            text(e.request_id.as_deref().unwrap_or("")),
            text(e.payment_intent_id.as_deref().unwrap_or("")),
            credit.to_string(),
            charge.to_string(),
            e.balance_after.to_string(),
        ];
        line(out, &fields).map_err(io)
    })?;
    if let Some(done) = current {
        done.write(out).map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(summary)
}

/// One account's totals over its rows in the range.
struct Totals {
    account: AccountId,
    name: String,
    credits: u64,
    charges: u64,
    balance: u64,
}

impl Totals {
    fn write(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let empty = String::new;
        let fields = [
            "total".to_owned(),
            self.account.0.to_string(),
            text(&self.name),
            empty(),
            empty(),
            empty(),
            empty(),
            empty(),
            empty(),
            empty(),
            empty(),
            self.credits.to_string(),
            self.charges.to_string(),
            self.balance.to_string(),
        ];
        line(out, &fields)
    }
}

/// Text a client chose, made safe for a spreadsheet (no leading formula character).
fn text(value: &str) -> String {
    if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_owned()
    }
}

/// One CSV line, each field quoted when it needs to be (RFC 4180).
fn line(out: &mut dyn Write, fields: &[String]) -> std::io::Result<()> {
    let quoted: Vec<String> = fields
        .iter()
        .map(|f| {
            if f.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", f.replace('"', "\"\""))
            } else {
                f.clone()
            }
        })
        .collect();
    writeln!(out, "{}", quoted.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Charge, InitialCredit, testing};

    #[test]
    fn times_are_unix_seconds_dates_or_utc_times() {
        assert_eq!(parse_time("0").unwrap(), 0);
        assert_eq!(parse_time("1764547200").unwrap(), 1_764_547_200);
        assert_eq!(parse_time("1970-01-01").unwrap(), 0);
        assert_eq!(parse_time("2025-12-01").unwrap(), 1_764_547_200);
        assert_eq!(parse_time("2024-02-29").unwrap(), 1_709_164_800);
        assert_eq!(parse_time("2025-12-01T12:30:15Z").unwrap(), 1_764_592_215);
        // What the report prints, it reads back.
        for secs in [0, 951_782_400, 1_709_164_800, 1_764_592_215, 4_102_444_799] {
            assert_eq!(parse_time(&utc(secs)).unwrap(), secs, "{}", utc(secs));
        }
        for bad in [
            "",
            "-1",
            "2025-13-01",
            "2025-02-29",
            "2025-12-1",
            "1969-12-31",
            "2025-12-01T12:00:00",
            "2025-12-01T24:00:00Z",
            "2025-12-01 12:00",
            "yesterday",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fields_are_quoted_and_formulas_defused() {
        let mut out = Vec::new();
        line(
            &mut out,
            &[
                "a,b".into(),
                "say \"hi\"".into(),
                "two\nlines".into(),
                text("=HYPERLINK(\"x\")"),
                text("-1"),
                "plain".into(),
            ],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "\"a,b\",\"say \"\"hi\"\"\",\"two\nlines\",\"'=HYPERLINK(\"\"x\"\")\",'-1,plain\n"
        );
    }

    /// The report of a database with two accounts: each account's rows oldest first,
    /// then its totals; only the range asked for; one account when asked.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_report_lists_each_accounts_rows_and_totals() {
        let db = testing::TestDb::sqlite();
        let store = db.open().await;
        let mut spec = testing::new_account_spec(1);
        spec.name = "Acme, Inc.".into();
        let a = store
            .create_account(
                spec,
                InitialCredit {
                    cents: 100,
                    request_id: Some("req-new".into()),
                },
            )
            .await
            .unwrap();
        let mut spec = testing::new_account_spec(2);
        spec.name = "=cmd".into();
        let b = store
            .create_account(spec, InitialCredit::NONE)
            .await
            .unwrap();
        store
            .credit_payment(b, "pi_b".into(), 700, Some("req-pay".into()))
            .await
            .unwrap();
        store
            .charge_at_most(
                a,
                Charge::new(3, "lit_action")
                    .for_request(Some("req-run".into()))
                    .for_action("QmRun"),
            )
            .await
            .unwrap();
        store
            .charge_at_most(
                a,
                Charge::new(1, "add_group").for_request(Some("req-write".into())),
            )
            .await
            .unwrap();
        let path = db.sqlite_path().unwrap();
        let now = crate::store::now_unix();
        let all = LedgerRange {
            from: Some(now - 3600),
            to: Some(now + 3600),
        };
        let mut out = Vec::new();
        let summary = report(&path, all, None, &mut out, "test").unwrap();
        assert_eq!(
            summary,
            ReportSummary {
                entries: 4,
                accounts: 2
            }
        );
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<Vec<String>> = text
            .lines()
            .map(|l| {
                // Split outside quotes (the test's fields hold no quotes inside quotes).
                let mut fields = vec![String::new()];
                let mut quoted = false;
                for c in l.chars() {
                    match c {
                        '"' => quoted = !quoted,
                        ',' if !quoted => fields.push(String::new()),
                        c => fields.last_mut().unwrap().push(c),
                    }
                }
                fields
            })
            .collect();
        assert_eq!(lines[0].join(","), HEADER);
        assert!(lines.iter().all(|l| l.len() == 14), "{text}");
        let pick = |l: &Vec<String>, cols: &[usize]| -> Vec<String> {
            cols.iter().map(|&i| l[i].clone()).collect()
        };
        let cols = [0, 1, 2, 6, 7, 8, 9, 10, 11, 12, 13];
        let got: Vec<Vec<String>> = lines[1..].iter().map(|l| pick(l, &cols)).collect();
        let row = |v: [&str; 11]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let (a_id, b_id) = (a.0.to_string(), b.0.to_string());
        assert_eq!(
            got,
            vec![
                row([
                    "entry",
                    &a_id,
                    "Acme, Inc.",
                    "initial",
                    "initial credit",
                    "",
                    "req-new",
                    "",
                    "100",
                    "0",
                    "100"
                ]),
                row([
                    "entry",
                    &a_id,
                    "Acme, Inc.",
                    "charge",
                    "lit_action",
                    "QmRun",
                    "req-run",
                    "",
                    "0",
                    "3",
                    "97"
                ]),
                row([
                    "entry",
                    &a_id,
                    "Acme, Inc.",
                    "charge",
                    "add_group",
                    "",
                    "req-write",
                    "",
                    "0",
                    "1",
                    "96"
                ]),
                row([
                    "total",
                    &a_id,
                    "Acme, Inc.",
                    "",
                    "",
                    "",
                    "",
                    "",
                    "100",
                    "4",
                    "96"
                ]),
                row([
                    "entry",
                    &b_id,
                    "'=cmd",
                    "top_up",
                    "card payment",
                    "",
                    "req-pay",
                    "pi_b",
                    "700",
                    "0",
                    "700"
                ]),
                row([
                    "total", &b_id, "'=cmd", "", "", "", "", "", "700", "0", "700"
                ]),
            ]
        );
        // Each entry's time, both ways.
        let t: i64 = lines[1][4].parse().unwrap();
        assert!((now - 60..=now + 60).contains(&t));
        assert_eq!(lines[1][5], utc(t));

        // One account only.
        let mut out = Vec::new();
        let summary = report(&path, all, Some(b), &mut out, "test").unwrap();
        assert_eq!(summary.accounts, 1);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(!text.contains("Acme"));

        // A range with nothing in it: the header alone.
        let past = LedgerRange {
            from: Some(0),
            to: Some(now - 3600),
        };
        let mut out = Vec::new();
        assert_eq!(
            report(&path, past, None, &mut out, "test").unwrap(),
            ReportSummary::default()
        );
        assert_eq!(String::from_utf8(out).unwrap(), format!("{HEADER}\n"));
    }
}

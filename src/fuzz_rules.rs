//! `uopkit fuzz-rules NAME`: the rule checker (`uopkit_conformance::gen::rulecheck`, see
//! docs/rule-fuzzing.md) from the command line, for a named rule set or rule. Exit 0 when the
//! budget passes, 1 with the counterexample printed (and written as a case under `--out`),
//! 2 on bad input (an unknown name: the known ones are listed) and when nothing was checked
//! (`--seconds 0`, `--cases 0`; for `tinygrad:SET` also every expression unsupported or
//! raising: such a run proves nothing, so it must not read as a pass).
//!
//! `tinygrad:SET` (`tinygrad:symbolic`, `tinygrad:symbolic_simple`, `tinygrad:sym`,
//! `tinygrad:commutative`) checks one of tinygrad's own rule sets instead, through
//! `bridges/tinygrad/rules.py` (`uopkit_conformance::gen::tinygrad_rules`): the same
//! before ≡ after property on index arithmetic over bounded loop variables.
//!
//! `--level tensor` / `--level kernel` check the rule on whole generated tensor programs or
//! kernels instead of expressions (`uopkit_conformance::gen::rulecheck_levels`); `expr`
//! (the default) is the expression-level check above.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use uopkit_conformance::gen::rulecheck::{self, CheckConfig, CheckError, RuleUnderTest};
use uopkit_conformance::gen::rulecheck_levels::{self, LevelConfig, LevelError};
use uopkit_conformance::gen::tinygrad_rules::{self, Failure, RulesError, TinygradRulesConfig};

use crate::ui;

/// The arguments of `uopkit fuzz-rules`.
#[derive(clap::Args, Debug)]
pub struct FuzzRulesArgs {
    /// A rule set (`symbolic`) or one rule of it (`mod_affine`, …); `tinygrad:SET` for one of
    /// tinygrad's rule sets (`tinygrad:symbolic`), through the tinygrad bridge.
    pub name: String,
    /// Stop starting new cases after this many seconds.
    #[arg(long, default_value_t = 60)]
    pub seconds: u64,
    /// Generated expressions to check (each in both rewrite orders).
    #[arg(long, default_value_t = 100_000)]
    pub cases: u32,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where a counterexample is written as a case (`rule_<id>.json`, never overwriting), and
    /// whose earlier counterexamples of NAME are replayed first.
    #[arg(long, default_value = "corpus/regressions")]
    pub out: PathBuf,
    /// What is generated: expressions (`expr`), whole tensor programs (`tensor`) or kernels
    /// (`kernel`). Not for `tinygrad:SET` (expressions only).
    #[arg(long, value_enum, default_value_t = Level::Expr)]
    pub level: Level,
}

/// `--level`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Expr,
    Tensor,
    Kernel,
}

pub fn run(args: FuzzRulesArgs) -> ExitCode {
    if let Some(set) = args.name.strip_prefix("tinygrad:") {
        if args.level != Level::Expr {
            eprintln!("error: tinygrad:{set} is checked on expressions only (--level expr)");
            return ExitCode::from(2);
        }
        return run_tinygrad(set, &args);
    }
    // Test builds only (the compiler's `fault-injection` feature): faults named in
    // UOPKIT_TEST_FAULTS are switched on for this thread; normal builds ignore it.
    let _ = uopkit_compiler::rewrite::faults::activate_from_env();
    let rut = match RuleUnderTest::named(&args.name) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if args.level != Level::Expr {
        return run_level(&rut, &args);
    }
    let cfg = CheckConfig {
        cases: args.cases,
        seed: args.seed,
        time_budget: Some(Duration::from_secs(args.seconds)),
        regressions: Some(args.out.clone()),
        ..CheckConfig::default()
    };
    let start = Instant::now();
    let bar = ui::RuleBar::new(args.cases as u64);
    let budget = args.seconds;
    let result = rulecheck::check_rules_with(&rut, &cfg, &mut |r| {
        let left = budget.saturating_sub(start.elapsed().as_secs());
        bar.update(r.cases as u64, r.fired_cases as u64, Some(left));
    });
    bar.clear();
    match result {
        Ok(report) => {
            println!("{report}");
            passed_if_checked(&args.name, report.cases, &args)
        }
        Err(CheckError::Counterexample(c)) => {
            println!("{c}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--level tensor|kernel`: the rule on whole generated programs.
fn run_level(rut: &RuleUnderTest, args: &FuzzRulesArgs) -> ExitCode {
    let cfg = LevelConfig {
        cases: args.cases,
        seed: args.seed,
        time_budget: Some(Duration::from_secs(args.seconds)),
        regressions: Some(args.out.clone()),
        ..LevelConfig::default()
    };
    let start = Instant::now();
    let bar = ui::RuleBar::new(args.cases as u64);
    let budget = args.seconds;
    let mut progress = |r: &rulecheck_levels::LevelReport| {
        let left = budget.saturating_sub(start.elapsed().as_secs());
        bar.update(r.cases as u64, r.fired_cases as u64, Some(left));
    };
    let result = match args.level {
        Level::Tensor => rulecheck_levels::check_rules_on_tensors_with(rut, &cfg, &mut progress),
        _ => rulecheck_levels::check_rules_on_kernels_with(rut, &cfg, &mut progress),
    };
    bar.clear();
    match result {
        Ok(report) => {
            println!("{report}");
            passed_if_checked(&args.name, report.cases, args)
        }
        Err(LevelError::Counterexample(c)) => {
            println!("{c}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Exit 0 when the run checked something (`cases` generated cases); a run that checked none
/// (`--seconds 0`, `--cases 0`) proved nothing: it says so and exits 2, so that it never reads
/// as a pass.
fn passed_if_checked(name: &str, cases: u32, args: &FuzzRulesArgs) -> ExitCode {
    if cases > 0 {
        return ExitCode::SUCCESS;
    }
    println!("{name}: NOTHING WAS CHECKED (not a pass)");
    eprintln!(
        "error: {name}: no generated case was checked (--seconds {}, --cases {}); give it a budget that checks some",
        args.seconds, args.cases
    );
    ExitCode::from(2)
}

/// `fuzz-rules tinygrad:SET`: tinygrad's rule set `set` on `--cases` generated expressions
/// (int64 as weakint, int64, int32; comparisons), in batches; no batch starts after
/// `--seconds`.
fn run_tinygrad(set: &str, args: &FuzzRulesArgs) -> ExitCode {
    let cfg = TinygradRulesConfig {
        cases: args.cases,
        seed: args.seed,
        time_budget: Some(Duration::from_secs(args.seconds)),
        case_dir: Some(args.out.clone()),
        fault: std::env::var("UOPKIT_TINYGRAD_RULE_FAULT")
            .ok()
            .filter(|f| !f.is_empty()),
        ..TinygradRulesConfig::default()
    };
    let (python, origin) = tinygrad_rules::python_origin(&cfg);
    let bridge = tinygrad_rules::bridge_path();
    let start = Instant::now();
    let bar = ui::RuleBar::new(args.cases as u64);
    let budget = args.seconds;
    let result = tinygrad_rules::check_tinygrad_rules_with(set, &cfg, &mut |r| {
        let left = budget.saturating_sub(start.elapsed().as_secs());
        bar.update(r.cases as u64, r.rewritten as u64, Some(left));
    });
    bar.clear();
    // Which tinygrad answered: the interpreter (and where it was chosen), the bridge script.
    let under = format!(
        "  bridge: {} under {python} (from {origin})",
        bridge.display()
    );
    match result {
        Ok(r) => {
            // A run that checked no expression proved nothing: it is not a pass.
            let verdict = if r.checked == 0 {
                "NOTHING WAS CHECKED (not a pass)"
            } else {
                "no counterexample"
            };
            println!(
                "tinygrad:{}: {} expressions, {} checked ({} rewritten; {}; {} comparisons), {} may overflow, {} unsupported, {} raised, {} assignments, {:.1} s{}: {verdict}",
                r.rule_set,
                r.cases,
                r.checked,
                r.rewritten,
                r.by_dtype(),
                r.bool_roots,
                r.may_overflow,
                r.unsupported,
                r.raised,
                r.assignments,
                r.seconds,
                if r.stopped_by_time {
                    format!(" (stopped by --seconds {budget} before --cases {})", args.cases)
                } else {
                    String::new()
                }
            );
            println!("{under}");
            for m in r.unsupported_reasons.iter().chain(&r.raised_messages) {
                println!("  {m}");
            }
            if r.checked == 0 {
                eprintln!(
                    "error: tinygrad:{set}: no expression was checked (--seconds {budget}, --cases {}); give it a budget that checks some",
                    args.cases
                );
                return ExitCode::from(2);
            }
            ExitCode::SUCCESS
        }
        Err(Failure::Counterexample(c)) => {
            println!("{c}");
            println!("{under}");
            ExitCode::FAILURE
        }
        Err(Failure::Error(RulesError::Rejected(e))) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
        Err(Failure::Error(e)) => {
            eprintln!("error: tinygrad:{set}: {e}\n{under}");
            ExitCode::from(2)
        }
    }
}

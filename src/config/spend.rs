//! The spend settings of `tau.toml`: a role's `price = { input_per_mtok, output_per_mtok,
//! cache_read_per_mtok, cache_write_per_mtok }` (US dollars per million tokens) and
//! `[budget.<role>] daily_usd`, a role's daily budget.
//!
//! Invariants: every amount held is finite and not negative (a missing price key is 0); a budget
//! names a configured role that has a price (without one its spend could not be counted).

use std::collections::BTreeMap;

use toml::Value;

use super::error::{ConfigError, key_segment, render_value};
use super::model::ModelsConfig;
use super::reader::Section;

/// The keys of a role's `price` table.
pub(crate) const PRICE_KEYS: &[&str] = &[
    "input_per_mtok",
    "output_per_mtok",
    "cache_read_per_mtok",
    "cache_write_per_mtok",
];

/// A role's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RolePrice {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    pub cache_read_per_mtok: f64,
    pub cache_write_per_mtok: f64,
}

impl RolePrice {
    /// What these token counts cost, in US dollars.
    pub fn cost_usd(&self, input: u64, output: u64, cache_read: u64, cache_write: u64) -> f64 {
        // Token counts stay far below 2^52, so the conversions are exact.
        let per = |tokens: u64, price: f64| tokens as f64 * price / 1_000_000.0;
        per(input, self.input_per_mtok)
            + per(output, self.output_per_mtok)
            + per(cache_read, self.cache_read_per_mtok)
            + per(cache_write, self.cache_write_per_mtok)
    }
}

/// Prices and daily budgets, by role name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SpendConfig {
    /// `price` of `[models.roles.<role>]`.
    pub prices: BTreeMap<String, RolePrice>,
    /// `[budget.<role>] daily_usd`.
    pub daily_usd: BTreeMap<String, f64>,
}

impl SpendConfig {
    /// The price of `role`, if it has one.
    pub fn price(&self, role: &str) -> Option<&RolePrice> {
        self.prices.get(role)
    }

    /// The daily budget of `role` in US dollars, if it has one.
    pub fn budget(&self, role: &str) -> Option<f64> {
        self.daily_usd.get(role).copied()
    }
}

/// The `price` table of one role section, if present.
pub(crate) fn price_of(role: &Section<'_>) -> Result<Option<RolePrice>, ConfigError> {
    let Some(price) = role.table("price", PRICE_KEYS)? else {
        return Ok(None);
    };
    let amount = |key: &str| -> Result<f64, ConfigError> {
        Ok(dollars(
            &price,
            key,
            "US dollars per million tokens, a number of 0 or more",
        )?
        .unwrap_or(0.0))
    };
    Ok(Some(RolePrice {
        input_per_mtok: amount("input_per_mtok")?,
        output_per_mtok: amount("output_per_mtok")?,
        cache_read_per_mtok: amount("cache_read_per_mtok")?,
        cache_write_per_mtok: amount("cache_write_per_mtok")?,
    }))
}

/// `[budget.<role>] daily_usd = …` for every role, checked against the roles and their prices.
pub(crate) fn budgets(
    doc: &Section<'_>,
    models: &ModelsConfig,
    prices: &BTreeMap<String, RolePrice>,
) -> Result<BTreeMap<String, f64>, ConfigError> {
    let mut out = BTreeMap::new();
    let Some(tables) = doc.raw_table("budget", "tables of daily budgets, e.g. [budget.fast]")?
    else {
        return Ok(out);
    };
    for (role, value) in tables {
        let key = format!("budget.{}", key_segment(role));
        let Value::Table(table) = value else {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key,
                value: render_value(value),
                expected: format!("a table, e.g. [budget.{}] daily_usd = 1", key_segment(role)),
            });
        };
        let section = doc.child(&["budget", role], table, &["daily_usd"])?;
        let expected = "US dollars a day, a number above 0";
        let Some(daily) = dollars(&section, "daily_usd", expected)? else {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key,
                value: "a table without daily_usd".to_owned(),
                expected: format!("daily_usd = <{expected}>"),
            });
        };
        if daily <= 0.0 {
            let v = section
                .get("daily_usd")
                .cloned()
                .unwrap_or(Value::Float(daily));
            return Err(section.invalid("daily_usd", &v, expected));
        }
        if !models.roles.is_empty() && !models.roles.contains_key(role) {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key,
                value: format!("[budget.{}]", key_segment(role)),
                expected: format!(
                    "the name of a role in [models.roles] (no [models.roles.{}])",
                    key_segment(role)
                ),
            });
        }
        if !prices.contains_key(role) {
            return Err(ConfigError::Invalid {
                file: doc.file().to_path_buf(),
                key: format!("{key}.daily_usd"),
                value: render_value(section.get("daily_usd").unwrap_or(&Value::Float(daily))),
                expected: format!(
                    "a budget for a priced role: add price = {{ input_per_mtok = …, output_per_mtok = … }} to [models.roles.{}]",
                    key_segment(role)
                ),
            });
        }
        out.insert(role.clone(), daily);
    }
    Ok(out)
}

/// A dollar amount: an integer or a float, finite and not negative.
fn dollars(section: &Section<'_>, name: &str, expected: &str) -> Result<Option<f64>, ConfigError> {
    match section.get(name) {
        None => Ok(None),
        Some(Value::Integer(i)) if *i >= 0 => Ok(Some(*i as f64)),
        Some(Value::Float(f)) if f.is_finite() && *f >= 0.0 => Ok(Some(*f)),
        Some(v) => Err(section.invalid(name, v, expected)),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError, KnownNames};
    use crate::env::Env;

    const FAST: &str = "[models.roles.fast]\nprovider = \"fake\"\nmodel_id = \"f\"\n";

    fn load(text: &str) -> Result<Config, ConfigError> {
        Config::from_toml_str(
            text,
            Path::new("/t/tau.toml"),
            &Env::new(),
            &KnownNames::builtin(),
        )
    }

    fn err(text: &str) -> String {
        match load(text) {
            Ok(_) => panic!("expected an error for:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn prices_and_budgets_are_read() {
        let text = format!(
            "{FAST}price = {{ input_per_mtok = 1, output_per_mtok = 5.5, cache_read_per_mtok = 0.1 }}\n\n[budget.fast]\ndaily_usd = 1\n"
        );
        let config = load(&text).unwrap();
        let price = config.spend.price("fast").copied().unwrap();
        assert_eq!(price.input_per_mtok, 1.0);
        assert_eq!(price.output_per_mtok, 5.5);
        assert_eq!(price.cache_write_per_mtok, 0.0);
        assert_eq!(config.spend.budget("fast"), Some(1.0));
        // 1M input at 1 $ + 200k output at 5.5 $ + 1M cache reads at 0.1 $.
        let cost = price.cost_usd(1_000_000, 200_000, 1_000_000, 0);
        assert!((cost - 2.2).abs() < 1e-9, "{cost}");
        assert!(load(FAST).unwrap().spend.price("fast").is_none());
    }

    #[test]
    fn bad_prices_and_budgets_are_one_line_errors() {
        assert_eq!(
            err(&format!("{FAST}price = {{ input_per_mtok = -1 }}\n")),
            "/t/tau.toml: models.roles.fast.price.input_per_mtok = -1: expected US dollars per million tokens, a number of 0 or more"
        );
        let e = err(&format!("{FAST}price = {{ input = 1 }}\n"));
        assert!(
            e.starts_with("/t/tau.toml: models.roles.fast.price.input = 1:"),
            "{e}"
        );
        let priced = format!("{FAST}price = {{ input_per_mtok = 1 }}\n");
        let e = err(&format!("{priced}[budget.fast]\ndaily_usd = \"lots\"\n"));
        assert!(
            e.contains("budget.fast.daily_usd = \"lots\": expected US dollars a day"),
            "{e}"
        );
        let e = err(&format!("{priced}[budget.fast]\ndaily_usd = 0\n"));
        assert!(e.contains("budget.fast.daily_usd = 0: expected"), "{e}");
        let e = err(&format!("{priced}[budget.slow]\ndaily_usd = 1\n"));
        assert!(e.contains("no [models.roles.slow]"), "{e}");
        let e = err(&format!("{FAST}[budget.fast]\ndaily_usd = 1\n"));
        assert!(e.contains("add price = "), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let e = err(&format!("{priced}[budget.fast]\nmonthly_usd = 1\n"));
        assert!(e.contains("budget.fast.monthly_usd"), "{e}");
    }
}

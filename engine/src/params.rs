//! A pipeline's parameter values ([`Params`]): the declared defaults, then `--set
//! NAME=VALUE` pairs parsed as the generated `Params::from_args` parses them (the runtime's
//! `abi::param` / `abi::size_param`, the same messages), and the stage arguments that
//! read them ([`Params::num`], [`Params::text`]).

use std::collections::HashMap;

use sluice_compiler::ir::decls::ParamDecl;
use sluice_compiler::ir::plan::ArgValue;
use sluice_compiler::ir::types::{ParamType, Value};
use sluice_compiler::physical::ParamRule;
use sluice_runtime::abi;

use crate::num::Num;

/// One parameter's value.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A number or a boolean.
    Num(Num),
    /// Text, a path or a glob.
    Text(String),
}

/// The values of a pipeline's parameters, by name, and those of the pipelines it takes
/// (`sample_from`, `zip`, `concatenate`: set as `--set INPUT.NAME=VALUE`), by input.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Params {
    values: HashMap<String, Param>,
    inputs: Vec<(String, Params)>,
}

impl Params {
    /// The declared defaults overridden by `set`; an error names an unknown parameter, a
    /// bad value or a parameter without a default that `set` leaves out.
    pub fn from_args(decls: &[ParamDecl], set: &[(String, String)]) -> Result<Params, String> {
        let mut values = HashMap::new();
        for d in decls {
            if let Some(v) = &d.default {
                values.insert(d.name.clone(), of_value(d.ty, v)?);
            }
        }
        for (name, text) in set {
            let Some(d) = decls.iter().find(|d| &d.name == name) else {
                let names: Vec<&str> = decls.iter().map(|d| d.name.as_str()).collect();
                return Err(format!("unknown parameter `{name}` (parameters: {})", names.join(", ")));
            };
            let v = match d.ty {
                ParamType::Glob | ParamType::Path | ParamType::Str => Param::Text(abi::param(name, text)?),
                ParamType::Bool => Param::Num(Num::Bool(abi::param(name, text)?)),
                ParamType::U32 => Param::Num(Num::U32(abi::param(name, text)?)),
                ParamType::U64 => Param::Num(Num::U64(abi::param(name, text)?)),
                ParamType::I64 => Param::Num(Num::I64(abi::param(name, text)?)),
                ParamType::F64 => Param::Num(Num::F64(abi::param(name, text)?)),
                ParamType::Size => Param::Num(Num::U64(abi::size_param(name, text)?)),
            };
            values.insert(name.clone(), v);
        }
        if let Some(d) = decls.iter().find(|d| !values.contains_key(&d.name)) {
            return Err(format!("parameter `{}` has no default: set it (`--set {}=...`)", d.name, d.name));
        }
        Ok(Params { values, inputs: Vec::new() })
    }

    /// The parameters of `pipeline` (one of `all`, the file's pipelines) as the generated
    /// `Params::from_args` makes them: its own from `set`, and those of each pipeline it
    /// takes from the pairs `INPUT.NAME=VALUE` (an error prefixed `INPUT.`), each checked
    /// as the generated `Params::check` checks them.
    pub fn of_pipeline(
        all: &[sluice_compiler::Pipeline],
        pipeline: &sluice_compiler::Pipeline,
        set: &[(String, String)],
    ) -> Result<Params, String> {
        let inputs = takes(&pipeline.optimized.plan);
        let mut nested: Vec<Vec<(String, String)>> = vec![Vec::new(); inputs.len()];
        let mut own = Vec::new();
        'pairs: for (k, v) in set {
            for (i, input) in inputs.iter().enumerate() {
                if let Some(rest) = k.strip_prefix(&format!("{input}.")) {
                    nested[i].push((rest.to_string(), v.clone()));
                    continue 'pairs;
                }
            }
            own.push((k.clone(), v.clone()));
        }
        let mut params = Params::from_args(&pipeline.decls.params, &own)?;
        for (input, set) in inputs.into_iter().zip(nested) {
            let p = all
                .iter()
                .find(|p| p.name() == input)
                .ok_or_else(|| format!("no pipeline `{input}` in the file"))?;
            let nested = Params::of_pipeline(all, p, &set).map_err(|e| format!("{input}.{e}"))?;
            params.inputs.push((input, nested));
        }
        params.check(&pipeline.physical.param_rules(), &pipeline.decls.params)?;
        Ok(params)
    }

    /// The parameters of the pipeline `input` this one takes ([`Params::of_pipeline`]).
    pub fn input(&self, input: &str) -> Option<&Params> {
        self.inputs.iter().find(|(name, _)| name == input).map(|(_, p)| p)
    }

    /// The generated `Params` struct's `Debug` text for these values (what the resume
    /// state's and the cache file's fingerprints hash): `Params { NAME: VALUE, .. }` in
    /// the order declared, each value as its Rust type prints it, then each input's.
    pub fn debug_text(&self, decls: &[ParamDecl]) -> String {
        self.debug_in(decls, &[])
    }

    fn debug_in(&self, decls: &[ParamDecl], all: &[sluice_compiler::Pipeline]) -> String {
        let mut fields: Vec<String> = decls
            .iter()
            .map(|d| {
                let v = match (self.values.get(&d.name), d.ty) {
                    (Some(Param::Text(s)), _) => format!("{s:?}"),
                    (Some(Param::Num(n)), _) => debug_num(*n),
                    (None, _) => "?".into(),
                };
                format!("{}: {v}", d.name)
            })
            .collect();
        for (input, p) in &self.inputs {
            let decls = all.iter().find(|q| q.name() == input).map(|q| &q.decls.params[..]).unwrap_or(&[]);
            fields.push(format!("{input}: {}", p.debug_in(decls, all)));
        }
        if fields.is_empty() { "Params".into() } else { format!("Params {{ {} }}", fields.join(", ")) }
    }

    /// [`Params::debug_text`] of a pipeline that takes others (`all`: the file's).
    pub fn debug_text_in(&self, decls: &[ParamDecl], all: &[sluice_compiler::Pipeline]) -> String {
        self.debug_in(decls, all)
    }

    /// Checks the values against what the stages they size need, as the generated
    /// `Params::check` does (`compiler/src/codegen/params.rs`: the same rules, in the same
    /// order, with the same messages): a count at least 1, a range's step not 0, a shard's
    /// index below its count, a limit, and the memory bound within the declared budget.
    pub fn check(&self, rules: &[ParamRule], decls: &[ParamDecl]) -> Result<(), String> {
        // A value as the generated code reads it: `self.name as u64`, or a constant.
        let value = |v: &ArgValue| -> Result<(u64, String), String> {
            match v {
                ArgValue::Param(p) => Ok((self.u64(v)?, format!("parameter `{p}`"))),
                ArgValue::Const(Value::Int(n)) if *n >= 0 => Ok((*n as u64, n.to_string())),
                ArgValue::Const(Value::UInt(n)) => Ok((*n, n.to_string())),
                other => Err(format!("a shard argument `{other}`")),
            }
        };
        let param = |name: &String| self.u64(&ArgValue::Param(name.clone()));
        for rule in rules {
            match rule {
                ParamRule::AtLeastOne { param: p, stage, arg } => {
                    if param(p)? < 1 {
                        return Err(format!(
                            "parameter `{p}` is 0: the `{arg}` of `{stage}` it sets must be at least 1"
                        ));
                    }
                }
                ParamRule::NonZero { param: p, stage, arg } => {
                    if param(p)? == 0 {
                        return Err(format!(
                            "parameter `{p}` is 0: the `{arg}` of `{stage}` it sets must not be 0"
                        ));
                    }
                }
                ParamRule::IndexBelowCount { index, count } => {
                    let ((i, i_name), (n, n_name)) = (value(index)?, value(count)?);
                    if i >= n {
                        return Err(match (index, count) {
                            (ArgValue::Param(_), ArgValue::Param(_)) => format!(
                                "{i_name} is {i}, {n_name} is {n}: the `index` of `shard` must be below its `num_shards`"
                            ),
                            (ArgValue::Param(_), _) => format!(
                                "{i_name} is {i}: the `index` of `shard` must be below its `num_shards` ({n})"
                            ),
                            _ => format!(
                                "{n_name} is {n}: the `num_shards` of `shard` must be above its `index` ({i})"
                            ),
                        });
                    }
                }
                ParamRule::AtMost { param: p, stage, arg, max } => {
                    let v = param(p)?;
                    if v > *max {
                        return Err(format!(
                            "parameter `{p}` is {v}: the `{arg}` of `{stage}` it sets must be at most {max}"
                        ));
                    }
                }
                ParamRule::WithinBudget { bound, budget } => {
                    let of = |name: &str| self.u64(&ArgValue::Param(name.to_string())).ok();
                    let found = bound.eval(&of);
                    if found > *budget {
                        let values: Vec<(String, u64, Option<u64>)> = bound
                            .params()
                            .into_iter()
                            .map(|p| {
                                let default =
                                    match decls.iter().find(|d| d.name == p).and_then(|d| d.default.as_ref())
                                    {
                                        Some(Value::Int(n)) if *n >= 0 => Some(*n as u64),
                                        Some(Value::UInt(n) | Value::Bytes(n)) => Some(*n),
                                        _ => None,
                                    };
                                let v = of(&p).unwrap_or(0);
                                (p, v, default)
                            })
                            .collect();
                        let values: Vec<(&str, u64, Option<u64>)> =
                            values.iter().map(|(p, v, d)| (p.as_str(), *v, *d)).collect();
                        return Err(abi::over_budget(found, *budget, &values));
                    }
                }
            }
        }
        Ok(())
    }

    /// These values with the number parameter `name` set to `v` (in its type, as the
    /// generated `reshard` sets a shard's count and index).
    pub fn with_count(&self, name: &str, v: u64) -> Result<Params, String> {
        let mut p = self.clone();
        match p.values.get_mut(name) {
            Some(Param::Num(old)) => {
                *old = Num::U64(v)
                    .cast(old.dtype())
                    .map_err(|e| format!("{v} does not fit parameter `{name}`: {e}"))?;
                Ok(p)
            }
            _ => Err(format!("parameter `{name}` is not a number")),
        }
    }

    /// The value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.values.get(name)
    }

    /// A number argument of a stage (a constant or a parameter).
    pub fn num(&self, v: &ArgValue) -> Result<Num, String> {
        match v {
            ArgValue::Const(Value::Int(n)) => Ok(Num::I64(*n)),
            ArgValue::Const(Value::UInt(n) | Value::Bytes(n)) => Ok(Num::U64(*n)),
            ArgValue::Const(Value::Float(x)) => Ok(Num::F64(*x)),
            ArgValue::Const(Value::Bool(b)) => Ok(Num::Bool(*b)),
            ArgValue::Param(p) => match self.values.get(p) {
                Some(Param::Num(n)) => Ok(*n),
                _ => Err(format!("parameter `{p}` is not a number")),
            },
            other => Err(format!("argument `{other}` where a number is needed")),
        }
    }

    /// A count argument (`as u64`, as the generated code converts it).
    pub fn u64(&self, v: &ArgValue) -> Result<u64, String> {
        match self.num(v)?.cast(sluice_compiler::ir::types::DType::U64)? {
            Num::U64(n) => Ok(n),
            _ => Err("a count".into()),
        }
    }

    /// An `i64` argument.
    pub fn i64(&self, v: &ArgValue) -> Result<i64, String> {
        match self.num(v)?.cast(sluice_compiler::ir::types::DType::I64)? {
            Num::I64(n) => Ok(n),
            _ => Err("an integer".into()),
        }
    }

    /// A text argument (a path or a glob).
    pub fn text(&self, v: &ArgValue) -> Result<String, String> {
        match v {
            ArgValue::Const(Value::Str(s)) => Ok(s.clone()),
            ArgValue::Param(p) => match self.values.get(p) {
                Some(Param::Text(s)) => Ok(s.clone()),
                _ => Err(format!("parameter `{p}` is not text")),
            },
            other => Err(format!("`{other}` where a path or glob is needed")),
        }
    }
}

/// A declared default as a value of the parameter's type.
fn of_value(ty: ParamType, v: &Value) -> Result<Param, String> {
    let n = match v {
        Value::Str(s) => return Ok(Param::Text(s.clone())),
        Value::Bool(b) => Num::Bool(*b),
        Value::Int(n) => Num::I64(*n),
        Value::UInt(n) | Value::Bytes(n) => Num::U64(*n),
        Value::Float(x) => Num::F64(*x),
        Value::List(_) => return Err("a list default".into()),
    };
    let dtype = match ty {
        ParamType::Bool => sluice_compiler::ir::types::DType::Bool,
        ParamType::U32 => sluice_compiler::ir::types::DType::U32,
        ParamType::U64 | ParamType::Size => sluice_compiler::ir::types::DType::U64,
        ParamType::I64 => sluice_compiler::ir::types::DType::I64,
        ParamType::F64 => sluice_compiler::ir::types::DType::F64,
        ParamType::Glob | ParamType::Path | ParamType::Str => {
            return Err("a number for a text parameter".into());
        }
    };
    Ok(Param::Num(n.cast(dtype)?))
}

/// The pipelines `plan` takes (`sample_from`, `zip`, `concatenate`), each once, in the
/// order the generated `Params` holds them (the compiler's one rule).
pub fn takes(plan: &sluice_compiler::ir::plan::Plan) -> Vec<String> {
    sluice_compiler::ir::combine::taken(plan)
}

/// A number as its Rust type's `Debug` prints it (the generated struct's field).
fn debug_num(n: Num) -> String {
    match n {
        Num::Bool(v) => format!("{v:?}"),
        Num::U8(v) => format!("{v:?}"),
        Num::I32(v) => format!("{v:?}"),
        Num::U32(v) => format!("{v:?}"),
        Num::I64(v) => format!("{v:?}"),
        Num::U64(v) => format!("{v:?}"),
        Num::F32(v) => format!("{v:?}"),
        Num::F64(v) => format!("{v:?}"),
    }
}

//! Binding a call's arguments to a signature's parameters: positional arguments fill the
//! parameters in order, named ones go by name. Used by stage checks, per-field operation
//! typing and the lowering; each caller turns the problems into its own diagnostics.

use crate::ast;

/// A problem binding arguments.
#[derive(Debug, Clone, Copy)]
pub enum BindError<'a> {
    /// A named argument the signature does not have.
    Unknown(&'a ast::Ident),
    /// A positional argument past the last parameter.
    TooMany(&'a ast::Arg),
    /// A parameter given a second time (`slot` is its index).
    Twice {
        /// The first argument for it.
        first: &'a ast::Arg,
        /// The second.
        again: &'a ast::Arg,
        /// The parameter's index.
        slot: usize,
    },
}

/// The argument for each of `params` (`None` where not given), and every problem; the
/// first argument for a parameter wins.
pub fn bind<'a>(params: &[&str], args: &'a [ast::Arg]) -> (Vec<Option<&'a ast::Arg>>, Vec<BindError<'a>>) {
    let mut bound: Vec<Option<&ast::Arg>> = vec![None; params.len()];
    let mut errors = Vec::new();
    let mut next = 0;
    for arg in args {
        let slot = match &arg.name {
            None if next < params.len() => {
                next += 1;
                next - 1
            }
            None => {
                errors.push(BindError::TooMany(arg));
                continue;
            }
            Some(name) => match params.iter().position(|p| *p == name.name) {
                Some(i) => i,
                None => {
                    errors.push(BindError::Unknown(name));
                    continue;
                }
            },
        };
        match bound[slot] {
            Some(first) => errors.push(BindError::Twice { first, again: arg, slot }),
            None => bound[slot] = Some(arg),
        }
    }
    (bound, errors)
}

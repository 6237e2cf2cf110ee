//! The lexer and recursive-descent parser of the label selector query grammar, following the
//! apiserver's token rules (so that errors name the same tokens).

use std::collections::BTreeSet;

use super::SelectorError;
use super::requirement::{Operator, Requirement};
use crate::names;

/// Parses a selector string into its requirements (unsorted).
pub(super) fn parse(input: &str) -> Result<Vec<Requirement>, SelectorError> {
    let tokens = lex(input)?;
    Parser { tokens, pos: 0 }.parse()
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    End,
    ClosedPar,
    Comma,
    Not,
    DoubleEquals,
    Equals,
    GreaterThan,
    Identifier(String),
    In,
    LessThan,
    NotEquals,
    NotIn,
    OpenPar,
}

impl Token {
    /// The literal, as the apiserver quotes it in errors.
    fn literal(&self) -> &str {
        match self {
            Token::End => "",
            Token::ClosedPar => ")",
            Token::Comma => ",",
            Token::Not => "!",
            Token::DoubleEquals => "==",
            Token::Equals => "=",
            Token::GreaterThan => ">",
            Token::Identifier(s) => s,
            Token::In => "in",
            Token::LessThan => "<",
            Token::NotEquals => "!=",
            Token::NotIn => "notin",
            Token::OpenPar => "(",
        }
    }

    /// In value position, the keywords `in` and `notin` are ordinary words.
    fn as_value(&self) -> Token {
        match self {
            Token::In => Token::Identifier("in".into()),
            Token::NotIn => Token::Identifier("notin".into()),
            other => other.clone(),
        }
    }
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn symbol(s: &str) -> Option<Token> {
    Some(match s {
        ")" => Token::ClosedPar,
        "," => Token::Comma,
        "!" => Token::Not,
        "==" => Token::DoubleEquals,
        "=" => Token::Equals,
        ">" => Token::GreaterThan,
        "<" => Token::LessThan,
        "!=" => Token::NotEquals,
        "(" => Token::OpenPar,
        _ => return None,
    })
}

fn lex(input: &str) -> Result<Vec<Token>, SelectorError> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    loop {
        while i < chars.len() && is_blank(chars[i]) {
            i += 1;
        }
        let Some(&c) = chars.get(i) else {
            tokens.push(Token::End);
            return Ok(tokens);
        };
        if is_special(c) {
            // Longest run of special characters that still forms a known symbol.
            let mut buffer = String::new();
            let mut last = None;
            while let Some(&c) = chars.get(i).filter(|c| is_special(**c)) {
                buffer.push(c);
                match symbol(&buffer) {
                    Some(token) => {
                        last = Some(token);
                        i += 1;
                    }
                    None if last.is_some() => break,
                    None => i += 1,
                }
            }
            match last {
                Some(token) => tokens.push(token),
                None => {
                    return Err(SelectorError::LabelSyntax(format!(
                        "error expected: keyword found '{buffer}'"
                    )));
                }
            }
        } else {
            let start = i;
            while i < chars.len() && !is_special(chars[i]) && !is_blank(chars[i]) {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            tokens.push(match word.as_str() {
                "in" => Token::In,
                "notin" => Token::NotIn,
                _ => Token::Identifier(word),
            });
        }
    }
}

struct Parser {
    tokens: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Token {
        self.tokens.get(self.pos).cloned().unwrap_or(Token::End)
    }

    fn next(&mut self) -> Token {
        let token = self.peek();
        self.pos += 1;
        token
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, SelectorError> {
        let syntax = |m: String| SelectorError::LabelSyntax(m);
        let mut requirements = Vec::new();
        loop {
            match self.peek().as_value() {
                Token::Identifier(_) | Token::Not => {
                    requirements.push(self.requirement()?);
                    match self.next().as_value() {
                        Token::End => return Ok(requirements),
                        Token::Comma => match self.peek().as_value() {
                            Token::Identifier(_) | Token::Not => {}
                            t => {
                                return Err(syntax(format!(
                                    "found '{}', expected: identifier after ','",
                                    t.literal()
                                )));
                            }
                        },
                        t => {
                            return Err(syntax(format!(
                                "found '{}', expected: ',' or 'end of string'",
                                t.literal()
                            )));
                        }
                    }
                }
                Token::End => return Ok(requirements),
                t => {
                    return Err(syntax(format!(
                        "found '{}', expected: !, identifier, or 'end of string'",
                        t.literal()
                    )));
                }
            }
        }
    }

    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut negated = false;
        let mut token = self.next().as_value();
        if token == Token::Not {
            negated = true;
            token = self.next().as_value();
        }
        let Token::Identifier(key) = token else {
            return Err(SelectorError::LabelSyntax(format!(
                "found '{}', expected: identifier",
                token.literal()
            )));
        };
        // The parser validates keys with an unset field path, which Go prints as `<nil>`.
        let key_problems = names::qualified_name(&key);
        if !key_problems.is_empty() {
            return Err(SelectorError::Requirement(format!(
                "<nil>: Invalid value: {key:?}: {}",
                key_problems.join("; ")
            )));
        }
        let unary = matches!(self.peek().as_value(), Token::End | Token::Comma);
        if negated || unary {
            let operator = if negated {
                Operator::DoesNotExist
            } else {
                Operator::Exists
            };
            return Requirement::new(&key, operator, Vec::new())
                .map_err(SelectorError::Requirement);
        }
        let operator = match self.next() {
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Equals => Operator::Equals,
            Token::DoubleEquals => Operator::DoubleEquals,
            Token::NotEquals => Operator::NotEquals,
            Token::GreaterThan => Operator::GreaterThan,
            Token::LessThan => Operator::LessThan,
            t => {
                return Err(SelectorError::LabelSyntax(format!(
                    "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                    t.literal()
                )));
            }
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.value_set()?,
            _ => self.exact_value()?,
        };
        Requirement::new(&key, operator, values.into_iter().collect())
            .map_err(SelectorError::Requirement)
    }

    fn value_set(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        let syntax = |m: String| SelectorError::LabelSyntax(m);
        let open = self.next().as_value();
        if open != Token::OpenPar {
            return Err(syntax(format!("found '{}' expected: '('", open.literal())));
        }
        let mut values = BTreeSet::new();
        match self.peek().as_value() {
            Token::ClosedPar => {
                self.next();
                values.insert(String::new());
                return Ok(values);
            }
            Token::Identifier(_) | Token::Comma => {}
            t => {
                return Err(syntax(format!(
                    "found '{}', expected: ',', ')' or identifier",
                    t.literal()
                )));
            }
        }
        loop {
            match self.next().as_value() {
                Token::Identifier(value) => {
                    values.insert(value);
                    match self.peek().as_value() {
                        Token::Comma => continue,
                        Token::ClosedPar => break,
                        t => {
                            return Err(syntax(format!(
                                "found '{}', expected: ',' or ')'",
                                t.literal()
                            )));
                        }
                    }
                }
                Token::Comma => {
                    // `(,a)`, `(a,,b)` and `(a,)` all contain the empty value.
                    let following = self.peek().as_value();
                    if values.is_empty()
                        || following == Token::Comma
                        || following == Token::ClosedPar
                    {
                        values.insert(String::new());
                    }
                    if following == Token::ClosedPar {
                        break;
                    }
                }
                t => {
                    return Err(syntax(format!(
                        "found '{}', expected: ',', or identifier",
                        t.literal()
                    )));
                }
            }
        }
        let close = self.next();
        if close != Token::ClosedPar {
            return Err(syntax(format!(
                "found '{}', expected: ')'",
                close.literal()
            )));
        }
        Ok(values)
    }

    fn exact_value(&mut self) -> Result<BTreeSet<String>, SelectorError> {
        match self.peek().as_value() {
            Token::End | Token::Comma => Ok(BTreeSet::from([String::new()])),
            _ => match self.next().as_value() {
                Token::Identifier(value) => Ok(BTreeSet::from([value])),
                t => Err(SelectorError::LabelSyntax(format!(
                    "found '{}', expected: identifier",
                    t.literal()
                ))),
            },
        }
    }
}

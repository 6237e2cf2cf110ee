//! The words two fronts of one node exchange on the hand-over socket, when a new front takes the
//! listening socket of the one serving.
//!
//! The conversation, one line each way at a time:
//!
//! 1. the starting front asks: [`Message::Take`] with the address it is to listen on;
//! 2. the serving front answers [`Message::Give`] with its listening socket riding along (an
//!    `SCM_RIGHTS` file descriptor), or [`Message::Refuse`];
//! 3. once the starting front accepts on that socket it says [`Message::Taken`], and the
//!    serving front stops accepting. The socket stays open in the new front, so no connection
//!    waiting in its queue is lost.
//!
//! Every line starts with [`PROTOCOL`]: a front that reads another word closes the
//! conversation, and the starting front then listens afresh.

use std::fmt;
use std::net::SocketAddr;

/// The first word of every line: the protocol and its version.
pub const PROTOCOL: &str = "selfhost-front/1";

/// The longest line either side reads.
pub const MAX_LINE: usize = 256;

/// One line of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    /// A starting front asks for the listening socket of this address.
    Take {
        /// The address it is to listen on.
        listen: SocketAddr,
    },
    /// The serving front gives its listening socket (the descriptor rides with this line).
    Give {
        /// The address that socket listens on.
        listen: SocketAddr,
    },
    /// The serving front keeps its socket.
    Refuse(Refusal),
    /// The starting front accepts on the socket: the serving front stops accepting.
    Taken,
}

/// Why the serving front keeps its socket. (A front told to stop closes its hand-over socket
/// at once, so a starting front finds none to ask, and listens afresh.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It listens on another address than the one asked for.
    Elsewhere {
        /// The address it listens on.
        listen: SocketAddr,
    },
}

/// A line that is not one of the protocol's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a line of {PROTOCOL}: {line:?}")]
pub struct Unreadable {
    /// The line read (cut short when long).
    pub line: String,
}

impl fmt::Display for Message {
    /// The line, without its newline.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Message::Take { listen } => write!(f, "{PROTOCOL} take {listen}"),
            Message::Give { listen } => write!(f, "{PROTOCOL} give {listen}"),
            Message::Refuse(Refusal::Elsewhere { listen }) => {
                write!(f, "{PROTOCOL} refuse elsewhere {listen}")
            }
            Message::Taken => write!(f, "{PROTOCOL} taken"),
        }
    }
}

impl Message {
    /// The line with its newline, as sent.
    pub fn to_line(&self) -> String {
        format!("{self}\n")
    }

    /// Reads one line (its newline, if any, ignored).
    ///
    /// # Errors
    /// The line is not one of the protocol's.
    pub fn parse(line: &str) -> Result<Message, Unreadable> {
        let unreadable = || Unreadable {
            line: line.chars().take(80).collect(),
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let address = |text: &str| text.parse::<SocketAddr>().map_err(|_| unreadable());
        match words.as_slice() {
            [PROTOCOL, "take", listen] => Ok(Message::Take {
                listen: address(listen)?,
            }),
            [PROTOCOL, "give", listen] => Ok(Message::Give {
                listen: address(listen)?,
            }),
            [PROTOCOL, "refuse", "elsewhere", listen] => Ok(Message::Refuse(Refusal::Elsewhere {
                listen: address(listen)?,
            })),
            [PROTOCOL, "taken"] => Ok(Message::Taken),
            _ => Err(unreadable()),
        }
    }
}

/// What a serving front listening on `held` answers to `asked`: its socket when asked for that
/// address, else why not. `None`: `asked` is not a request, and the conversation ends
/// unanswered.
pub fn answer(held: SocketAddr, asked: &Message) -> Option<Message> {
    let Message::Take { listen } = asked else {
        return None;
    };
    Some(if *listen == held {
        Message::Give { listen: held }
    } else {
        Message::Refuse(Refusal::Elsewhere { listen: held })
    })
}

//! The hand-over's lines and the serving front's answers.

use std::net::SocketAddr;

use proptest::prelude::*;

use super::handover::{MAX_LINE, Message, PROTOCOL, Refusal, answer};

fn addr(text: &str) -> SocketAddr {
    text.parse().expect("address")
}

#[test]
fn every_line_reads_back_as_itself() {
    let node = addr("10.0.0.11:6443");
    let lines = [
        (Message::Take { listen: node }, "take 10.0.0.11:6443"),
        (Message::Give { listen: node }, "give 10.0.0.11:6443"),
        (
            Message::Refuse(Refusal::Elsewhere {
                listen: addr("[fd00::11]:6443"),
            }),
            "refuse elsewhere [fd00::11]:6443",
        ),
        (Message::Taken, "taken"),
    ];
    for (message, words) in lines {
        let line = message.to_line();
        assert_eq!(line, format!("{PROTOCOL} {words}\n"));
        assert!(line.len() <= MAX_LINE, "{line}");
        assert_eq!(Message::parse(&line), Ok(message), "{line}");
    }
}

#[test]
fn other_words_are_unreadable() {
    for line in [
        "",
        "take 10.0.0.11:6443",
        "selfhost-front/2 take 10.0.0.11:6443",
        "selfhost-front/1 take",
        "selfhost-front/1 take 10.0.0.11",
        "selfhost-front/1 give 10.0.0.11:6443 extra",
        "selfhost-front/1 refuse",
        "selfhost-front/1 refuse stopping",
        "selfhost-front/1 hello",
    ] {
        let error = Message::parse(line).expect_err(line);
        assert!(error.to_string().contains(PROTOCOL), "{error}");
    }
}

#[test]
fn a_serving_front_gives_its_socket_only_for_its_address() {
    let held = addr("10.0.0.11:6443");
    let take = |listen: &str| Message::Take {
        listen: addr(listen),
    };
    assert_eq!(
        answer(held, &take("10.0.0.11:6443")),
        Some(Message::Give { listen: held })
    );
    assert_eq!(
        answer(held, &take("10.0.0.12:6443")),
        Some(Message::Refuse(Refusal::Elsewhere { listen: held })),
        "another address: the asker names the wrong front"
    );
    assert_eq!(
        answer(held, &take("10.0.0.11:7443")),
        Some(Message::Refuse(Refusal::Elsewhere { listen: held }))
    );
    for not_a_request in [Message::Taken, Message::Give { listen: held }] {
        assert_eq!(answer(held, &not_a_request), None);
    }
}

proptest! {
    /// Any address survives its line, and no line the protocol writes is longer than a reader
    /// takes.
    #[test]
    fn any_address_survives_its_line(ip in any::<std::net::IpAddr>(), port in any::<u16>()) {
        let listen = SocketAddr::new(ip, port);
        for message in [
            Message::Take { listen },
            Message::Give { listen },
            Message::Refuse(Refusal::Elsewhere { listen }),
        ] {
            let line = message.to_line();
            prop_assert!(line.len() <= MAX_LINE);
            prop_assert_eq!(Message::parse(&line), Ok(message));
        }
    }
}

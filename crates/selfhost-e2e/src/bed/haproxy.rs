//! The load balancer in front of several control-plane nodes, as kubeadm's high-availability
//! guide sets it up: HAProxy in TCP mode (TLS passes through), round robin over the nodes'
//! kube-apiservers, each checked by an HTTPS `GET /readyz` that must answer 200. Checks run
//! every 2 s (HAProxy's default interval); a node leaves at its first failed check and comes
//! back at its first passed one, and a connection refused by a node is sent to another
//! (`option redispatch`), which is the balancer the simulator models.

use std::fmt::Write as _;
use std::net::SocketAddr;

/// HAProxy's configuration for a frontend at `listen` over the `backends` (name, address).
pub fn config(listen: SocketAddr, backends: &[(String, SocketAddr)]) -> String {
    let mut text = String::new();
    text.push_str(
        "global\n\
         \x20 maxconn 4096\n\
         defaults\n\
         \x20 mode tcp\n\
         \x20 option redispatch\n\
         \x20 retries 3\n\
         \x20 timeout connect 2s\n\
         \x20 timeout client 1h\n\
         \x20 timeout server 1h\n\
         \x20 timeout check 2s\n",
    );
    let _ = writeln!(
        text,
        "frontend apiserver\n  bind {listen}\n  default_backend apiservers"
    );
    text.push_str(
        "backend apiservers\n\
         \x20 balance roundrobin\n\
         \x20 option httpchk GET /readyz\n\
         \x20 http-check expect status 200\n",
    );
    for (name, address) in backends {
        let _ = writeln!(
            text,
            "  server {name} {address} check check-ssl verify none inter 2s fall 1 rise 1"
        );
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_is_a_server_checked_on_readyz() {
        let listen: SocketAddr = "127.0.1.100:6443".parse().unwrap();
        let backends = vec![
            ("cp-1".to_string(), "127.0.1.1:6443".parse().unwrap()),
            ("cp-2".to_string(), "127.0.1.2:6443".parse().unwrap()),
        ];
        let text = config(listen, &backends);
        assert!(text.contains("bind 127.0.1.100:6443"));
        assert!(text.contains("option httpchk GET /readyz"));
        assert!(text.contains("server cp-1 127.0.1.1:6443 check check-ssl verify none"));
        assert!(text.contains("server cp-2 127.0.1.2:6443 check"));
        assert!(text.contains("mode tcp"));
    }
}

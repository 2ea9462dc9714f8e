//! Application labels of flow records (`app`, `app_source`; docs/specs/flow-record.md).
//!
//! The names and numbers live here, beside the record that carries them, so that every writer
//! (JSON, CSV, the database, IPFIX) and every reader shares one table; the classifier that picks
//! a label from a flow's first payload bytes is `trawl_app::classify`. A label is one byte of
//! table index and one of source: a record stays `Copy` and no text is allocated per flow.

/// An application protocol trawl names. The discriminant is the application's number
/// (IPFIX `applicationId`'s selector, docs/specs/ipfix.md): stable, only ever appended to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
#[allow(missing_docs)] // The names say it; `App::name` is the documented text.
pub enum App {
    Http = 1,
    Tls = 2,
    Quic = 3,
    Dns = 4,
    Ssh = 5,
    Smtp = 6,
    Imap = 7,
    Pop3 = 8,
    Ftp = 9,
    Sip = 10,
    Rtp = 11,
    Bittorrent = 12,
    Smb = 13,
    Rdp = 14,
    Ntp = 15,
    Dhcp = 16,
    Mqtt = 17,
    Kerberos = 18,
    Ldap = 19,
    Postgresql = 20,
    Mysql = 21,
    Redis = 22,
    Mdns = 23,
    Llmnr = 24,
    Netbios = 25,
    Ssdp = 26,
    Stun = 27,
    Snmp = 28,
    Syslog = 29,
    Dtls = 30,
    Radius = 31,
}

impl App {
    /// Every application, in number order.
    pub const ALL: [App; 31] = [
        App::Http,
        App::Tls,
        App::Quic,
        App::Dns,
        App::Ssh,
        App::Smtp,
        App::Imap,
        App::Pop3,
        App::Ftp,
        App::Sip,
        App::Rtp,
        App::Bittorrent,
        App::Smb,
        App::Rdp,
        App::Ntp,
        App::Dhcp,
        App::Mqtt,
        App::Kerberos,
        App::Ldap,
        App::Postgresql,
        App::Mysql,
        App::Redis,
        App::Mdns,
        App::Llmnr,
        App::Netbios,
        App::Ssdp,
        App::Stun,
        App::Snmp,
        App::Syslog,
        App::Dtls,
        App::Radius,
    ];

    /// The lowercase name records carry (`http`, `tls`, `quic`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            App::Http => "http",
            App::Tls => "tls",
            App::Quic => "quic",
            App::Dns => "dns",
            App::Ssh => "ssh",
            App::Smtp => "smtp",
            App::Imap => "imap",
            App::Pop3 => "pop3",
            App::Ftp => "ftp",
            App::Sip => "sip",
            App::Rtp => "rtp",
            App::Bittorrent => "bittorrent",
            App::Smb => "smb",
            App::Rdp => "rdp",
            App::Ntp => "ntp",
            App::Dhcp => "dhcp",
            App::Mqtt => "mqtt",
            App::Kerberos => "kerberos",
            App::Ldap => "ldap",
            App::Postgresql => "postgresql",
            App::Mysql => "mysql",
            App::Redis => "redis",
            App::Mdns => "mdns",
            App::Llmnr => "llmnr",
            App::Netbios => "netbios",
            App::Ssdp => "ssdp",
            App::Stun => "stun",
            App::Snmp => "snmp",
            App::Syslog => "syslog",
            App::Dtls => "dtls",
            App::Radius => "radius",
        }
    }

    /// The application of a number ([`App`]'s discriminant).
    pub fn from_id(id: u8) -> Option<App> {
        App::ALL.get(usize::from(id).checked_sub(1)?).copied()
    }

    /// The application of a name ([`App::name`]).
    pub fn from_name(name: &str) -> Option<App> {
        App::ALL.into_iter().find(|a| a.name() == name)
    }
}

/// How a label was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AppSource {
    /// The flow's first payload bytes matched the protocol.
    Payload = 0,
    /// Only the port is a well-known one of the protocol (the payload matched nothing, or
    /// there was none): a guess, marked as such.
    Port = 1,
}

impl AppSource {
    /// `payload` or `port`.
    pub const fn name(self) -> &'static str {
        match self {
            AppSource::Payload => "payload",
            AppSource::Port => "port",
        }
    }

    /// The source of a name ([`AppSource::name`]).
    pub fn from_name(name: &str) -> Option<AppSource> {
        match name {
            "payload" => Some(AppSource::Payload),
            "port" => Some(AppSource::Port),
            _ => None,
        }
    }
}

/// A flow's application label: `app` and `app_source` of its record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AppLabel {
    /// The application.
    pub app: App,
    /// From payload or only from the port.
    pub source: AppSource,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_names_round_trip() {
        for (i, a) in App::ALL.into_iter().enumerate() {
            assert_eq!(a as usize, i + 1, "{a:?}: ALL is in number order");
            assert_eq!(App::from_id(a as u8), Some(a));
            assert_eq!(App::from_name(a.name()), Some(a));
        }
        assert_eq!(App::from_id(0), None);
        assert_eq!(App::from_id(App::ALL.len() as u8 + 1), None);
    }
}

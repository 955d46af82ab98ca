//! Secrets never stored: API keys, tokens, passwords, private keys and credentials in URLs and
//! connection strings are found in text and replaced by `[REDACTED:kind]` before anything is
//! written.
//!
//! [`redact`] scans one text. [`Redact`] is implemented by every record a write stores (captures,
//! updates, memories with their versions, decisions, signals, outcomes, free-form JSON); its
//! [`Redact::redact_fields`] hands each string field, map key included, to a [`Redactor`], which
//! replaces what it finds and reports it as [`Redaction`]s (field, kind, count), so that the
//! response can say so.
//!
//! Detection has three layers, from the most specific to the most general:
//!
//! 1. Formats that name themselves: PEM and PuTTY private keys, `AGE-SECRET-KEY-1…`, JWTs, and
//!    the token shapes of about seventy providers (`ghp_`, `glrt-`, `xapp-`, `sk-ant-`, `AKIA…`,
//!    `SG.…`, `shpat_`, `hf_`, `pypi-AgE…`, `dop_v1_`, `GOCSPX-`, Discord and Telegram bot
//!    tokens, Azure client secrets…). The shapes follow gitleaks' default rule set (MIT licence;
//!    see NOTICE).
//! 2. Credentials by their place: a URL's password, a Sentry DSN's key, an Azure `AccountKey=`,
//!    `SharedAccessKey=` or SAS `sig=`, a connection string's `Password=`, `curl -u user:pass`,
//!    `Authorization: Basic|Bearer|Token …`.
//! 3. Assignments: a value given to a key that names a secret (`DB_PASS=…`, `password: …`,
//!    `"apiKey": "…"`, `<password>…</password>`, `--token …`, `-p…` after `mysql`, a netrc
//!    `password …`, a Kubernetes `name: DB_PASSWORD` / `value: …` pair). The key decides: a
//!    password, secret, token or `api_key` is redacted whatever its value looks like; a bare
//!    `key`, `auth` or `credentials` only when the value looks random; a page, CSRF or sync
//!    token, a public or sort key is not a secret. The value decides only what it plainly is
//!    not: a placeholder (`${DB_PASSWORD}`, `<token>`, `****`, `changeme`), a number, a
//!    boolean, a path (`PWD=/home/ada/src/app`), a URL, a reference in code (`config.password`,
//!    `os.environ[…]`, `get_token()`, `userPassword` in code), or a word in a sentence that goes
//!    on ("password: rotate it monthly"). An environment-style `UPPER_CASE=value` is never
//!    code, so `DB_PASSWORD=CorrectHorseBatteryStaple` is redacted.
//!
//! Compiling the hundred-odd rules costs several milliseconds, which a hook process would pay
//! at every run. So each rule is reduced to keywords, one of which any match must contain (the
//! literals every match starts with, taken from the pattern by `regex-syntax`, or listed by
//! hand where a pattern starts with a class), and one pass of an Aho-Corasick searcher over the
//! text tells which rules can match: only those are compiled, once per process, and run. Text
//! with none of the keywords (most text) costs that one pass. Every pattern is a `regex` crate
//! pattern, so every scan is linear in the text. Where two rules find overlapping secrets, the
//! earlier (more specific) wins, so each secret is reported once under its most precise kind.
//! Hex digests (commit SHAs, checksums), UUIDs, base64 images and lockfile integrity hashes match
//! no rule: no rule flags a string for looking random alone, because those are random too.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::{LazyLock, OnceLock};

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::{Captures, Regex};
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use serde::{Deserialize, Serialize};

use crate::decision::{CaptureDecision, OutcomeInput, SignalInput, UpdateDecision};
use crate::input::{CaptureInput, UpdateInput};
use crate::memory::{Memory, MemoryVersion};
use crate::store::MemoryRecord;
use crate::workflow::{CreateWorkflow, StepUpdate};

macro_rules! secret_kinds {
    ($($variant:ident => $name:literal,)*) => {
        /// What kind of secret a redaction replaced; the name appears in the marker
        /// `[REDACTED:name]` and says which credential to rotate.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum SecretKind {
            $($variant,)*
        }

        impl SecretKind {
            /// Every kind, in declaration order.
            pub const ALL: &'static [SecretKind] = &[$(SecretKind::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(SecretKind::$variant => $name,)*
                }
            }
        }
    };
}

secret_kinds! {
    PrivateKey => "private-key",
    Jwt => "jwt",
    AnthropicApiKey => "anthropic-api-key",
    OpenaiApiKey => "openai-api-key",
    HuggingfaceToken => "huggingface-token",
    PerplexityApiKey => "perplexity-api-key",
    GroqApiKey => "groq-api-key",
    ReplicateToken => "replicate-token",
    LangsmithKey => "langsmith-key",
    XaiApiKey => "xai-api-key",
    GithubToken => "github-token",
    GitlabToken => "gitlab-token",
    NpmToken => "npm-token",
    PypiToken => "pypi-token",
    RubygemsToken => "rubygems-token",
    ClojarsToken => "clojars-token",
    DockerToken => "docker-token",
    TerraformToken => "terraform-token",
    VaultToken => "vault-token",
    DopplerToken => "doppler-token",
    PulumiToken => "pulumi-token",
    DatabricksToken => "databricks-token",
    ArtifactoryToken => "artifactory-token",
    SourcegraphToken => "sourcegraph-token",
    SonarToken => "sonar-token",
    CircleciToken => "circleci-token",
    BuildkiteToken => "buildkite-token",
    OpenshiftToken => "openshift-token",
    PlanetscaleToken => "planetscale-token",
    PrefectToken => "prefect-token",
    ReadmeToken => "readme-token",
    ScalingoToken => "scalingo-token",
    InfracostToken => "infracost-token",
    NetlifyToken => "netlify-token",
    AwsAccessKeyId => "aws-access-key-id",
    AwsSecretAccessKey => "aws-secret-access-key",
    AwsPresignedSignature => "aws-presigned-signature",
    AzureStorageKey => "azure-storage-key",
    AzureSasSignature => "azure-sas-signature",
    AzureClientSecret => "azure-client-secret",
    GoogleApiKey => "google-api-key",
    GoogleOauthSecret => "google-oauth-secret",
    AlibabaAccessKey => "alibaba-access-key",
    DigitaloceanToken => "digitalocean-token",
    HerokuApiKey => "heroku-api-key",
    FlyioToken => "flyio-token",
    SlackToken => "slack-token",
    SlackWebhook => "slack-webhook",
    DiscordToken => "discord-token",
    DiscordWebhook => "discord-webhook",
    TelegramBotToken => "telegram-bot-token",
    TeamsWebhook => "teams-webhook",
    TwilioKey => "twilio-key",
    SendgridKey => "sendgrid-key",
    MailgunKey => "mailgun-key",
    MailchimpKey => "mailchimp-key",
    BrevoKey => "brevo-key",
    StripeKey => "stripe-key",
    SquareToken => "square-token",
    ShopifyToken => "shopify-token",
    BraintreeToken => "braintree-token",
    FlutterwaveKey => "flutterwave-key",
    DuffelToken => "duffel-token",
    EasypostKey => "easypost-key",
    ShippoToken => "shippo-token",
    FacebookToken => "facebook-token",
    MapboxToken => "mapbox-token",
    TwitterToken => "twitter-token",
    HubspotToken => "hubspot-token",
    FigmaToken => "figma-token",
    DropboxToken => "dropbox-token",
    AdobeSecret => "adobe-secret",
    ContentfulToken => "contentful-token",
    LinearApiKey => "linear-api-key",
    NotionToken => "notion-token",
    AtlassianToken => "atlassian-token",
    PostmanKey => "postman-key",
    OctopusKey => "octopus-key",
    OnepasswordToken => "onepassword-token",
    MaxmindKey => "maxmind-key",
    HarnessKey => "harness-key",
    AirtableToken => "airtable-token",
    TypeformToken => "typeform-token",
    GrafanaToken => "grafana-token",
    NewRelicKey => "new-relic-key",
    DynatraceToken => "dynatrace-token",
    SentryToken => "sentry-token",
    SentryDsn => "sentry-dsn",
    BearerToken => "bearer-token",
    BasicAuth => "basic-auth",
    UrlPassword => "url-password",
    ConnectionStringPassword => "connection-string-password",
    Password => "password",
    Secret => "secret",
    ApiKey => "api-key",
    Token => "token",
}

impl SecretKind {
    /// The marker that replaces a secret of this kind.
    pub fn marker(self) -> String {
        format!("{MARKER_PREFIX}{}]", self.as_str())
    }
}

impl fmt::Display for SecretKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

const MARKER_PREFIX: &str = "[REDACTED:";

/// Secrets of one kind replaced in one field of a record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Redaction {
    /// The field's path in the record: `title`, `content`, `tags[2]`, `metadata.{key}`,
    /// `metadata` (a key), `reason`, `versions[1].content`; for a decision `statement`,
    /// `assumptions[0]`, `linked_pr`, `metrics.{key}` and so on.
    pub field: String,
    pub kind: SecretKind,
    pub count: usize,
}

/// A text with its secrets replaced, and the kind of each secret replaced, in order of rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<'a> {
    pub text: Cow<'a, str>,
    pub kinds: Vec<SecretKind>,
}

/// Which part of a match is the secret, and how its kind is decided.
#[derive(Clone, Copy)]
enum Part {
    /// The whole match is the secret.
    Whole,
    /// Only capture group 1 is; the rest (a key name, a URL's user) stays.
    Group,
    /// The `value` group of an assignment of this shape, if the key names a secret and the
    /// value passes the checks for placeholders, code and prose; the key gives the kind.
    Assignment(Shape),
}

/// How an assignment is written, which decides how much of its context is checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `key = value`, `key: value`, `"key": "value"`, `key => value`: in code, config or prose.
    Operator,
    /// `the password is Staging#2024`: prose, so only a value mixing letters and digits counts.
    Prose,
    /// `<password>…</password>`, `<add key="…Password" value="…"/>`, a Kubernetes env pair, a
    /// command-line flag, a netrc line: the value is always a literal.
    Literal,
}

struct Rule {
    kind: SecretKind,
    pattern: &'static str,
    part: Part,
    /// A further check on the secret's text.
    check: fn(&str) -> bool,
    /// Words one of which every match contains (compared ignoring ASCII case), for a pattern
    /// whose matches start with no literal; empty means the literals are taken from the pattern.
    keywords: &'static [&'static str],
}

const fn rule(kind: SecretKind, pattern: &'static str) -> Rule {
    Rule { kind, pattern, part: Part::Whole, check: not_filler, keywords: &[] }
}

const fn group(kind: SecretKind, pattern: &'static str) -> Rule {
    Rule { kind, pattern, part: Part::Group, check: not_filler, keywords: &[] }
}

const fn checked(kind: SecretKind, pattern: &'static str, part: Part, check: fn(&str) -> bool) -> Rule {
    Rule { kind, pattern, part, check, keywords: &[] }
}

/// The kind is the key's; `Password` only stands in. The key ends with one of
/// [`KEY_WORDS`], which is what the prefilter looks for.
const fn assignment(shape: Shape, pattern: &'static str) -> Rule {
    Rule { kind: SecretKind::Password, pattern, part: Part::Assignment(shape), check: not_filler, keywords: KEY_WORDS }
}

impl Rule {
    /// The rule with `keywords` for the prefilter, where the pattern starts with a class.
    const fn needs(self, keywords: &'static [&'static str]) -> Rule {
        Rule { keywords, ..self }
    }
}

/// A word of every key [`key_ending`] accepts: `pass` for password, passwd and passphrase,
/// `pw` for pwd, `secret` for secret_key_base, `cred` for credentials and creds.
const KEY_WORDS: &[&str] = &["pass", "pw", "secret", "token", "cred", "auth", "key"];

/// The words an assignment's key must end with to be considered at all (the key's own checks
/// in [`classify_key`] then decide).
macro_rules! key_ending {
    () => {
        r"(?:secret[_.-]?key[_.-]?base|password|passwd|passphrase|pass|pwd|pw|secret|token|credentials?|creds|auth|key)"
    };
}

/// An assignment's value: quoted (anything up to the closing quote on the same line) or bare
/// (up to whitespace, a quote, or punctuation that ends a value in code and query strings).
macro_rules! value {
    () => {
        r#"(?P<value>"[^"\n]*"|'[^'\n]*'|`[^`\n]*`|[^\s"'`,;&(){}\[\]<>]+)"#
    };
}

/// Every rule, most specific first: where two find overlapping secrets, the earlier wins.
/// `\b` is taken as an ASCII word boundary (see [`ascii_boundaries`]).
static RULES: &[Rule] = {
    use SecretKind::*;
    &[
        // Private keys.
        rule(
            PrivateKey,
            r"(?s)-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|\z)",
        ),
        rule(PrivateKey, r"(?s)PuTTY-User-Key-File-\d: .*?(?:Private-(?:MAC|Hash): [0-9a-fA-F]+|\z)"),
        rule(PrivateKey, r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
        // Tokens that name themselves.
        rule(Jwt, r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"),
        rule(GrafanaToken, r"\beyJrIjoi[A-Za-z0-9]{70,400}={0,3}"),
        checked(AnthropicApiKey, r"\bsk-ant-[A-Za-z0-9_-]{20,}", Part::Whole, looks_random),
        checked(OpenaiApiKey, r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", Part::Whole, looks_random),
        rule(HuggingfaceToken, r"\b(?:hf_|api_org_)[A-Za-z]{34}\b"),
        rule(PerplexityApiKey, r"\bpplx-[A-Za-z0-9]{48}\b"),
        rule(GroqApiKey, r"\bgsk_[A-Za-z0-9]{52}\b"),
        rule(ReplicateToken, r"\br8_[A-Za-z0-9]{37}\b"),
        rule(LangsmithKey, r"\blsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}\b"),
        rule(XaiApiKey, r"\bxai-[A-Za-z0-9]{80}\b"),
        rule(GithubToken, r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{36,255}\b"),
        rule(GithubToken, r"\bgithub_pat_[A-Za-z0-9_]{50,255}\b"),
        rule(GitlabToken, r"\bgl(?:pat|ptt|rt|dt|ft|imt|agent|oas|soat|ffct|cbt)-[A-Za-z0-9_.-]{20,}"),
        rule(GitlabToken, r"\bGR1348941[A-Za-z0-9_-]{20}"),
        rule(NpmToken, r"\bnpm_[A-Za-z0-9]{36}\b"),
        rule(PypiToken, r"\bpypi-AgE[A-Za-z0-9_-]{70,}"),
        rule(RubygemsToken, r"\brubygems_[a-f0-9]{48}\b"),
        rule(ClojarsToken, r"(?i)\bCLOJARS_[a-z0-9]{60}\b"),
        rule(DockerToken, r"\bdckr_pat_[A-Za-z0-9_-]{27,}"),
        rule(TerraformToken, r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,70}").needs(&[".atlasv1."]),
        rule(VaultToken, r"\bhv[sb]\.[A-Za-z0-9_-]{20,}"),
        rule(DopplerToken, r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}\b"),
        rule(PulumiToken, r"\bpul-[a-f0-9]{40}\b"),
        rule(DatabricksToken, r"\bdapi[a-f0-9]{32}(?:-\d)?\b"),
        rule(ArtifactoryToken, r"\bAKCp[A-Za-z0-9]{69}\b"),
        rule(SourcegraphToken, r"\bsgp_(?:(?:[a-fA-F0-9]{16}|local)_)?[a-fA-F0-9]{40}\b"),
        rule(SonarToken, r"\bsq[pua]_[a-f0-9]{40}\b"),
        rule(CircleciToken, r"\bCCIPAT_[A-Za-z0-9]{22}_[a-f0-9]{40}\b"),
        rule(BuildkiteToken, r"\bbkua_[a-f0-9]{40}\b"),
        rule(OpenshiftToken, r"\bsha256~[A-Za-z0-9_-]{43}"),
        rule(PlanetscaleToken, r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,64}"),
        rule(PrefectToken, r"\bpnu_[A-Za-z0-9]{36}\b"),
        rule(ReadmeToken, r"\brdme_[a-z0-9]{70}\b"),
        rule(ScalingoToken, r"\btk-us-[A-Za-z0-9_-]{48}\b"),
        rule(InfracostToken, r"\bico-[A-Za-z0-9]{32}\b"),
        rule(NetlifyToken, r"\bnfp_[A-Za-z0-9]{36}\b"),
        rule(AwsAccessKeyId, r"\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
        group(
            AwsSecretAccessKey,
            r#"(?i)(?:aws_?secret_?access_?key|aws_?secret_?key|secret_?access_?key)["']?\s*(?::=|=>|=|:)\s*["']?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|$)"#,
        ),
        group(AwsPresignedSignature, r"(?i)\bX-Amz-Signature=([0-9a-f]{64})"),
        group(AzureStorageKey, r"(?i)(?:\bAccountKey=|--account-key[ =]+[\x22']?)([A-Za-z0-9+/]{40,}={0,2})"),
        group(AzureStorageKey, r"(?i)\bSharedAccessKey=([A-Za-z0-9+/]{20,}={0,2})"),
        group(AzureSasSignature, r"(?i)[?&;]sig=([A-Za-z0-9%+/=]{20,})"),
        group(AzureClientSecret, r"(?m)(?:^|[\s'\x22`=:(,>])([A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34})(?:$|[\s'\x22`<),;])")
            .needs(&["q~"]),
        rule(GoogleApiKey, r"\bAIza[0-9A-Za-z_-]{35}"),
        rule(GoogleOauthSecret, r"\bGOCSPX-[A-Za-z0-9_-]{28}"),
        rule(AlibabaAccessKey, r"\bLTAI[A-Za-z0-9]{20}\b"),
        rule(DigitaloceanToken, r"\bdo[opr]_v1_[a-f0-9]{64}\b"),
        rule(HerokuApiKey, r"\bHRKU-AA[0-9A-Za-z_-]{58}"),
        rule(FlyioToken, r"\b(?:fo1_[A-Za-z0-9_-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,}={0,3})"),
        rule(SlackToken, r"\bxox(?:e\.xox)?[abposre]-[A-Za-z0-9-]{10,}|\bxapp-\d-[A-Za-z0-9-]{10,}"),
        rule(SlackWebhook, r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]{20,}"),
        rule(DiscordToken, r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,38}\b"),
        rule(DiscordWebhook, r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_-]{60,}"),
        group(TelegramBotToken, r"(?:\b|bot)(\d{8,10}:AA[A-Za-z0-9_-]{33})\b").needs(&[":aa"]),
        rule(TeamsWebhook, r"(?i)https://[a-z0-9-]+\.webhook\.office\.com/webhookb2/[a-z0-9@-]+/IncomingWebhook/[a-z0-9]{32}/[a-z0-9-]{36}"),
        rule(TwilioKey, r"\bSK[0-9a-fA-F]{32}\b"),
        rule(SendgridKey, r"\bSG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43}\b"),
        rule(MailgunKey, r"\bkey-[0-9a-f]{32}\b|\b[0-9a-f]{32}-[0-9a-f]{8}-[0-9a-f]{8}\b"),
        rule(MailchimpKey, r"\b[0-9a-f]{32}-us\d{1,2}\b").needs(&["-us"]),
        rule(BrevoKey, r"\bx(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}\b"),
        rule(StripeKey, r"\b(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,99}\b|\bwhsec_[A-Za-z0-9+/=]{32,}"),
        rule(SquareToken, r"\bEAAA[A-Za-z0-9_-]{22,60}\b|\bsq0(?:atp|csp)-[A-Za-z0-9_-]{22,43}\b"),
        rule(ShopifyToken, r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b"),
        rule(BraintreeToken, r"\baccess_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}\b"),
        rule(FlutterwaveKey, r"\bFLWSECK(?:_TEST)?-[a-hA-H0-9]{32}-X\b"),
        rule(DuffelToken, r"\bduffel_(?:test|live)_[A-Za-z0-9_=-]{43}"),
        rule(EasypostKey, r"\bEZ[AT]K[A-Za-z0-9]{54}\b"),
        rule(ShippoToken, r"\bshippo_(?:live|test)_[a-fA-F0-9]{40}\b"),
        rule(FacebookToken, r"\bEAA[MC][A-Za-z0-9]{100,}"),
        rule(MapboxToken, r"\bsk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,}"),
        rule(TwitterToken, r"\bA{22}[A-Za-z0-9%]{80,100}"),
        rule(HubspotToken, r"\bpat-(?:na|eu)\d-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
        rule(FigmaToken, r"\bfigd_[A-Za-z0-9_-]{40,}"),
        rule(DropboxToken, r"\bsl\.[A-Za-z0-9_=-]{130,}"),
        rule(AdobeSecret, r"\bp8e-[A-Za-z0-9]{32}\b"),
        rule(ContentfulToken, r"\bCFPAT-[A-Za-z0-9_-]{43}"),
        rule(LinearApiKey, r"\blin_api_[A-Za-z0-9]{40}\b"),
        rule(NotionToken, r"\bntn_[0-9]{11}[A-Za-z0-9]{35}\b|\bsecret_[A-Za-z0-9]{43}\b"),
        rule(AtlassianToken, r"\bATATT3[A-Za-z0-9_=-]{180,}"),
        rule(PostmanKey, r"\bPMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}\b"),
        rule(OctopusKey, r"\bAPI-[A-Z0-9]{26}\b"),
        rule(OnepasswordToken, r"\bops_eyJ[A-Za-z0-9+/]{250,}={0,3}"),
        rule(
            OnepasswordToken,
            r"\bA3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}\b",
        ),
        rule(MaxmindKey, r"\b[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk\b").needs(&["_mmk"]),
        rule(HarnessKey, r"\b(?:pat|sat)\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}\b"),
        rule(AirtableToken, r"\bpat[A-Za-z0-9]{14}\.[a-f0-9]{64}\b"),
        rule(TypeformToken, r"\btfp_[A-Za-z0-9_.=-]{59}"),
        rule(GrafanaToken, r"\bglc_[A-Za-z0-9+/]{32,400}={0,3}|\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}\b"),
        rule(NewRelicKey, r"\bNRAK-[A-Z0-9]{27}\b|(?i)\bNRII-[a-z0-9-]{32}|\bNRJS-[a-f0-9]{19}\b"),
        rule(DynatraceToken, r"(?i)\bdt0c01\.[a-z0-9]{24}\.[a-z0-9]{64}\b"),
        rule(SentryToken, r"\bsntryu_[a-f0-9]{64}\b|\bsntrys_eyJ[A-Za-z0-9+/=_]{50,}"),
        // Credentials by their place.
        group(SentryDsn, r"\bhttps?://([0-9a-f]{32})@[A-Za-z0-9.-]+(?::\d+)?/\d+"),
        checked(UrlPassword, r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/?#@\[\]]*:([^\s@/?#]+)@", Part::Group, not_placeholder)
            .needs(&["://"]),
        checked(BasicAuth, r#"\bcurl\b[^\n]*?\s(?:-u|--user)[ =]?["']?[^\s:"']+:([^\s"']+)"#, Part::Group, not_placeholder),
        checked(
            ConnectionStringPassword,
            r"(?i);[ \t]*(?:password|pwd)[ \t]*=[ \t]*([^;\r\n\x22']+)",
            Part::Group,
            not_placeholder,
        )
        .needs(&["password", "pwd"]),
        checked(ConnectionStringPassword, r"(?i)\b(?:password|pwd)=([^;\s]+);", Part::Group, not_placeholder)
            .needs(&["password=", "pwd="]),
        group(BasicAuth, r#"(?i)\bauthorization["']?[ \t]*[:=][ \t]*["']?basic[ \t]+([A-Za-z0-9+/]{8,}=*)"#),
        checked(BearerToken, r"(?i)\bbearer[ \t]+([A-Za-z0-9._~+/-]{16,}=*)", Part::Group, looks_random),
        checked(
            Token,
            r#"(?i)\bauthorization["']?[ \t]*[:=][ \t]*["']?token[ \t]+([A-Za-z0-9._~+/=-]{16,})"#,
            Part::Group,
            looks_random,
        ),
        // Assignments.
        assignment(
            Shape::Operator,
            concat!(
                r#"(?i)(?P<key>\b[a-z0-9_.-]{0,64}?"#,
                key_ending!(),
                r#")\b(?P<key_quote>["']?)[ \t]*(?P<op>:=|=>|\?=|=|:)[ \t]*"#,
                value!(),
                r"(?P<after>[(\[]?)"
            ),
        ),
        assignment(
            Shape::Prose,
            r"(?i)(?P<key>\b(?:password|passphrase|passwd))[ \t]+(?:is|was)[ \t]+(?P<value>[^\s\x22'`,;()\[\]<>]+)",
        ),
        assignment(
            Shape::Literal,
            concat!(
                r#"(?i)\bname:[ \t]*["']?(?P<key>[a-z0-9_.-]{0,64}?"#,
                key_ending!(),
                r#")["']?[ \t]*\r?\n[ \t]*value:[ \t]*"#,
                value!()
            ),
        ),
        assignment(Shape::Literal, concat!(r"(?i)<(?P<key>[a-z0-9_.:-]{0,64}?", key_ending!(), r")>(?P<value>[^<\n]+)</")),
        assignment(
            Shape::Literal,
            concat!(
                r#"(?i)<add[ \t]+key=["'](?P<key>[a-z0-9_.:-]{0,64}?"#,
                key_ending!(),
                r#")["'][ \t]+value=["'](?P<value>[^"'\n]*)["']"#
            ),
        ),
        assignment(
            Shape::Literal,
            concat!(
                r#"(?i)(?:^|[ \t])--(?P<key>[a-z0-9-]{0,64}?"#,
                key_ending!(),
                r#")[ \t]+(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)"#
            ),
        ),
        assignment(
            Shape::Literal,
            r#"\b(?P<command>mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*?[ \t]-p(?P<value>[^\s"'-][^\s"']*)"#,
        ),
        assignment(
            Shape::Literal,
            r#"\b(?P<command>sshpass|docker[ \t]+login|podman[ \t]+login|twine[ \t]+upload)\b[^\n]*?[ \t]-p[ \t]+(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"'-][^\s"']*)"#,
        ),
        assignment(Shape::Literal, r"\bmachine\s+\S+\s+login\s+\S+\s+(?P<key>password)\s+(?P<value>\S+)"),
    ]
};

/// `\b` in the rules means an ASCII word boundary: a Unicode one would make the regex engine
/// leave its fast automata for any text that is not pure ASCII.
fn ascii_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

/// Which rules can match a text, found without compiling any of them.
struct Prefilter {
    /// Every rule's keywords, lowercase, matched ignoring ASCII case.
    keywords: AhoCorasick,
    /// The rules each keyword stands for.
    rules_of: Vec<Vec<usize>>,
    /// Rules that have no keyword and run on every text.
    always: Vec<usize>,
}

/// A keyword shorter than this would be found in nearly every text, so a rule whose literals
/// are shorter runs on every text instead.
const SHORTEST_KEYWORD: usize = 2;

/// Characters that match an ASCII letter under a rule's Unicode case folding (`(?i)s` matches
/// `ſ`, `(?i)k` the Kelvin sign) but not under the prefilter's ASCII folding. A text holding one
/// is checked by every rule rather than carrying keyword variants for them.
const FOLDING_TO_ASCII: [char; 2] = ['\u{17F}', '\u{212A}'];

impl Prefilter {
    fn new() -> Prefilter {
        let mut words: Vec<String> = Vec::new();
        let mut rules_of: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (index, rule) in RULES.iter().enumerate() {
            let keywords = if rule.keywords.is_empty() {
                prefix_literals(rule.pattern)
            } else {
                Some(rule.keywords.iter().map(|word| word.to_ascii_lowercase()).collect())
            };
            let Some(keywords) = keywords else {
                always.push(index);
                continue;
            };
            for keyword in keywords {
                match words.iter().position(|word| *word == keyword) {
                    Some(known) => rules_of[known].push(index),
                    None => {
                        words.push(keyword);
                        rules_of.push(vec![index]);
                    }
                }
            }
        }
        let keywords = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(&words)
            .expect("secret keywords are few and short");
        Prefilter { keywords, rules_of, always }
    }

    /// The rules that can match `text`, in the order of [`RULES`].
    fn candidates(&self, text: &str) -> Vec<usize> {
        if text.contains(FOLDING_TO_ASCII) {
            return (0..RULES.len()).collect();
        }
        let mut candidates = self.always.clone();
        for found in self.keywords.find_overlapping_iter(text) {
            candidates.extend(&self.rules_of[found.pattern().as_usize()]);
        }
        candidates.sort_unstable();
        candidates.dedup();
        candidates
    }
}

/// The literals every match of `pattern` starts with, lowercase, or `None` when they are
/// unbounded or too short to tell texts apart. Inexact literals (prefixes of longer ones the
/// extractor gave up on) serve as well: a match still starts with one of them. The patterns are
/// ASCII, so a literal that is not can only be a case-folding variant with a [`FOLDING_TO_ASCII`]
/// character (perhaps cut inside it), and a text holding one runs every rule: such literals are
/// left out.
fn prefix_literals(pattern: &str) -> Option<Vec<String>> {
    let hir = regex_syntax::parse(&ascii_boundaries(pattern)).expect("secret patterns are valid");
    let literals = Extractor::new().kind(ExtractKind::Prefix).extract(&hir);
    let mut keywords: Vec<String> = Vec::new();
    for literal in literals.literals()? {
        let bytes = literal.as_bytes();
        if bytes.len() < SHORTEST_KEYWORD {
            return None;
        }
        if !bytes.is_ascii() {
            continue;
        }
        let word = String::from_utf8(bytes.to_ascii_lowercase()).expect("ASCII is UTF-8");
        if !keywords.contains(&word) {
            keywords.push(word);
        }
    }
    // A rule left with no literal at all must still run somewhere: on every text.
    if keywords.is_empty() { None } else { Some(keywords) }
}

static PREFILTER: LazyLock<Prefilter> = LazyLock::new(Prefilter::new);

/// Each rule's own regex, compiled the first time a text needs it.
static RULE_REGEXES: LazyLock<Vec<OnceLock<Regex>>> = LazyLock::new(|| RULES.iter().map(|_| OnceLock::new()).collect());

fn rule_regex(index: usize) -> &'static Regex {
    RULE_REGEXES[index].get_or_init(|| Regex::new(&ascii_boundaries(RULES[index].pattern)).expect("secret patterns are valid"))
}

/// Replaces every secret in `text` by `[REDACTED:kind]`.
pub fn redact(text: &str) -> Redacted<'_> {
    // Secrets found, as (start, end, kind, rule); a rule's find is kept unless an earlier
    // rule's overlaps it.
    let mut found: Vec<(usize, usize, SecretKind)> = Vec::new();
    for index in PREFILTER.candidates(text) {
        let rule = &RULES[index];
        for captures in rule_regex(index).captures_iter(text) {
            let Some((start, end, kind)) = secret_span(rule, text, &captures) else { continue };
            if found.iter().all(|&(other_start, other_end, _)| end <= other_start || start >= other_end) {
                found.push((start, end, kind));
            }
        }
    }
    if found.is_empty() {
        return Redacted { text: Cow::Borrowed(text), kinds: Vec::new() };
    }
    let kinds = found.iter().map(|&(_, _, kind)| kind).collect();
    found.sort_by_key(|&(start, _, _)| start);
    let mut output = String::with_capacity(text.len());
    let mut last = 0;
    for (start, end, kind) in found {
        output.push_str(&text[last..start]);
        output.push_str(&kind.marker());
        last = end;
    }
    output.push_str(&text[last..]);
    Redacted { text: Cow::Owned(output), kinds }
}

/// Where the secret of one match lies and its kind, or `None` when the match is not a secret.
fn secret_span(rule: &Rule, text: &str, captures: &Captures<'_>) -> Option<(usize, usize, SecretKind)> {
    let (span, kind) = match rule.part {
        Part::Whole => (captures.get(0)?, rule.kind),
        Part::Group => (captures.get(1)?, rule.kind),
        Part::Assignment(shape) => return assignment_span(shape, text, captures),
    };
    let secret = span.as_str();
    if secret.contains(MARKER_PREFIX) || !(rule.check)(secret) {
        return None;
    }
    Some((span.start(), span.end(), kind))
}

/// Random keys mix letters and digits; a word-like `sk-learn-compatible-models` does not.
fn looks_random(text: &str) -> bool {
    let digits = text.bytes().any(|b| b.is_ascii_digit());
    let upper = text.bytes().any(|b| b.is_ascii_uppercase());
    let lower = text.bytes().any(|b| b.is_ascii_lowercase());
    digits && (upper || lower) && distinct_bytes(text) >= 8 && (upper && lower || text.len() >= 20)
}

fn distinct_bytes(text: &str) -> usize {
    let mut seen = [false; 256];
    text.bytes().for_each(|b| seen[usize::from(b)] = true);
    seen.iter().filter(|&&seen| seen).count()
}

/// A token's shape filled with `x`, `*` or an ellipsis, as documentation writes one.
fn not_filler(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    !(lower.contains("xxxx") || lower.contains("****") || lower.contains("...") || lower.contains('…') || distinct_bytes(text) < 5)
}

fn not_placeholder(text: &str) -> bool {
    !is_placeholder(text.trim())
}

/// How an assignment's key reads: which kind of secret it names, and whether its value must
/// also look random (a bare `key` or `auth` is as often a sort key or a mode as a secret).
struct KeyClass {
    kind: SecretKind,
    needs_random_value: bool,
}

/// Qualifiers that make a `…key` a credential whatever its value looks like.
const SECRET_KEY_QUALIFIERS: &[&str] = &[
    "api", "secret", "private", "access", "account", "master", "encryption", "encrypt", "signing", "sign", "hmac", "client",
    "app", "auth", "consumer", "license", "shared", "admin", "service", "session", "deploy", "webhook", "storage",
    "subscription", "developer", "jwt", "cookie", "crypt", "cipher", "aes",
];

/// Qualifiers of a `…key` that name a database, cache or message key, never a credential.
const PLAIN_KEY_QUALIFIERS: &[&str] = &[
    "primary", "foreign", "sort", "partition", "cache", "idempotency", "hash", "range", "row", "object", "s3", "dedup",
    "routing", "lookup", "map", "i18n", "translation", "cursor", "composite", "unique", "index", "group", "message",
    "dictionary", "redis", "lock", "shard", "order", "natural", "surrogate", "ssh", "gpg", "pgp", "kms", "hot", "short",
];

/// Qualifiers of a `…token` that name a position in a listing, a form's anti-forgery field, or
/// a counter, never a credential.
const PLAIN_TOKEN_QUALIFIERS: &[&str] =
    &["page", "pagination", "continuation", "cursor", "sync", "csrf", "xsrf", "resume", "idempotency", "next", "prev", "previous", "max", "num", "verification"];

/// Splits `DB_PASSWORD`, `dbPassword`, `x-api-key`, `_authToken` and `spring.datasource.password`
/// into lower-case words.
fn key_words(key: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let chars: Vec<char> = key.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            continue;
        }
        let hump = c.is_ascii_uppercase()
            && index > 0
            && (chars[index - 1].is_ascii_lowercase()
                || chars[index - 1].is_ascii_uppercase() && chars.get(index + 1).is_some_and(char::is_ascii_lowercase));
        if hump && !current.is_empty() {
            words.push(std::mem::take(&mut current));
        }
        current.push(c.to_ascii_lowercase());
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Which secret an assignment's key names, or `None` when it names none.
fn classify_key(key: &str) -> Option<KeyClass> {
    let words = key_words(key);
    let last = words.last()?.as_str();
    let before = words.len().checked_sub(2).map(|index| words[index].as_str());
    if words.iter().any(|word| matches!(word.as_str(), "public" | "publishable" | "pub")) {
        return None;
    }
    let explicit = |kind| Some(KeyClass { kind, needs_random_value: false });
    if last.ends_with("password") || last.ends_with("passwd") || last.ends_with("passphrase") || matches!(last, "pass" | "pwd" | "pw") {
        return explicit(SecretKind::Password);
    }
    if last == "base" && words.iter().any(|word| word == "secret") {
        return explicit(SecretKind::Secret);
    }
    if last.ends_with("secret") {
        return explicit(SecretKind::Secret);
    }
    if let Some(glued) = last.strip_suffix("token") {
        let qualifier = if glued.is_empty() { before } else { Some(glued) };
        let plain = words.iter().any(|word| PLAIN_TOKEN_QUALIFIERS.contains(&word.as_str()))
            || qualifier.is_some_and(|qualifier| PLAIN_TOKEN_QUALIFIERS.contains(&qualifier));
        return if plain { None } else { explicit(SecretKind::Token) };
    }
    if let Some(glued) = last.strip_suffix("key") {
        let qualifier = if glued.is_empty() { before } else { Some(glued) };
        return match qualifier {
            Some("api") => explicit(SecretKind::ApiKey),
            Some("private") => explicit(SecretKind::PrivateKey),
            Some(qualifier) if PLAIN_KEY_QUALIFIERS.contains(&qualifier) => None,
            Some(qualifier) if SECRET_KEY_QUALIFIERS.contains(&qualifier) => explicit(SecretKind::Secret),
            _ if !glued.is_empty() => None,
            _ => Some(KeyClass { kind: SecretKind::Secret, needs_random_value: true }),
        };
    }
    if matches!(last, "credentials" | "credential" | "creds" | "auth") {
        return Some(KeyClass { kind: SecretKind::Secret, needs_random_value: true });
    }
    None
}

/// An assignment's value is a secret when its key names one and the value is none of: a
/// placeholder, a number, a boolean, a path, a URL, a reference in code, or a word in a
/// sentence that goes on.
fn assignment_span(shape: Shape, text: &str, captures: &Captures<'_>) -> Option<(usize, usize, SecretKind)> {
    let key = captures.name("key");
    let value = captures.name("value")?;
    let class = match (captures.name("command"), key) {
        // `mysql -p…`, `docker login -p …`: the flag names no key, the command says it is a password.
        (Some(_), _) => KeyClass { kind: SecretKind::Password, needs_random_value: false },
        (None, Some(key)) => classify_key(&qualified_key(text, key.start(), key.as_str()))?,
        (None, None) => return None,
    };
    let raw = value.as_str();
    let quoted = raw.len() >= 2 && matches!(raw.as_bytes()[0], b'"' | b'\'' | b'`') && raw.as_bytes()[raw.len() - 1] == raw.as_bytes()[0];
    let (start, mut end) = if quoted { (value.start() + 1, value.end() - 1) } else { (value.start(), value.end()) };
    if shape == Shape::Prose {
        end = start + text[start..end].trim_end_matches(['.', ',', ':']).len();
    }
    let secret = &text[start..end];
    if secret.chars().count() < 4 || secret.contains(MARKER_PREFIX) || is_placeholder(secret) || is_plain_value(secret) {
        return None;
    }
    if class.needs_random_value && !looks_random(secret) {
        return None;
    }
    match (shape, key) {
        (Shape::Literal, _) => {}
        (Shape::Prose, _) => {
            let letters = secret.bytes().any(|b| b.is_ascii_alphabetic());
            let digits = secret.bytes().any(|b| b.is_ascii_digit());
            if !(letters && digits && secret.len() >= 6) {
                return None;
            }
        }
        (Shape::Operator, _) if quoted => {}
        (Shape::Operator, None) => return None,
        (Shape::Operator, Some(key)) => {
            if secret.starts_with('=') || is_dotted_code(secret) {
                return None;
            }
            let op = captures.name("op")?;
            // `DB_PASSWORD=CorrectHorseBatteryStaple`: an environment variable's value is a
            // literal, never a reference in code.
            let env_style = op.as_str() == "="
                && key.end() == op.start()
                && value.start() == op.end()
                && key.as_str().bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if !env_style {
                let called = captures.name("after").is_some_and(|after| !after.as_str().is_empty());
                if called || is_code_identifier(secret) {
                    return None;
                }
                let key_quoted = captures.name("key_quote").is_some_and(|quote| !quote.as_str().is_empty());
                let lowercase_word = secret.bytes().all(|b| b.is_ascii_lowercase());
                let sentence_goes_on = text[value.end()..]
                    .lines()
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with(|c: char| c.is_alphabetic()));
                if op.as_str() == ":" && !key_quoted && lowercase_word && (!starts_line(text, key.start()) || sentence_goes_on) {
                    return None;
                }
            }
        }
    }
    Some((start, end, class.kind))
}

/// A one-word key with the word before it in running text: "public key: age1…" names a
/// public key and "API key: …" an API key, where the bare `key` would say neither.
fn qualified_key(text: &str, start: usize, key: &str) -> String {
    if key_words(key).len() != 1 || !text[..start].ends_with(' ') {
        return key.to_owned();
    }
    let before = text[..start - 1].rsplit([' ', '\t', '\n']).next().unwrap_or("");
    if before.is_empty() || !before.chars().all(|c| c.is_ascii_alphabetic()) {
        return key.to_owned();
    }
    format!("{before}_{key}")
}

/// Values that say what they are: numbers, booleans, paths and URLs.
fn is_plain_value(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let number = value.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-' | b'+'))
        || value.strip_suffix(['s', 'm', 'h', 'd']).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let path = value.starts_with("~/")
        || value.starts_with("./")
        || value.starts_with("../")
        || value.starts_with('/') && value[1..].contains('/')
        || value.len() > 3 && value.as_bytes()[1] == b':' && value.as_bytes()[0].is_ascii_alphabetic() && value.as_bytes()[2] == b'\\';
    let url = lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("file://");
    number || path || url
}

/// Whether only indentation, a list dash or `export` precede `position` on its line: a key
/// there is a YAML or shell key, not a word in a sentence.
fn starts_line(text: &str, position: usize) -> bool {
    let line_start = text[..position].rfind('\n').map_or(0, |index| index + 1);
    let lead = text[line_start..position].trim_start();
    let lead = lead.strip_prefix("- ").unwrap_or(lead).trim_start();
    let lead = lead.strip_prefix("export ").unwrap_or(lead).trim_start();
    lead.is_empty() || lead == "\"" || lead == "'"
}

/// Placeholders stand for a secret without being one: `${DB_PASSWORD}`, `$TOKEN`, `<api-key>`,
/// `{{ secret }}`, `%(password)s`, `!vault`, `****`, `xxxxxxxx`, `your-api-key-here`, `changeme`,
/// and the type in a declaration (`token: String`).
fn is_placeholder(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let first = value.chars().next().unwrap_or(' ');
    if matches!(first, '$' | '<' | '{' | '%' | '[' | '(' | '@' | '#' | '!' | '&' | '*') || value.starts_with(MARKER_PREFIX) {
        return true;
    }
    let mut chars = value.chars();
    if let Some(first) = chars.next()
        && chars.all(|c| c == first)
    {
        return true;
    }
    const WORDS: &[&str] = &[
        "true", "false", "yes", "no", "on", "off", "null", "none", "nil", "undefined", "required", "optional", "empty",
        "redacted", "hidden", "masked", "secret", "password", "token", "string", "str", "bool", "boolean", "int",
        "integer", "number", "any", "object", "bytes", "text", "option", "secretstring", "secretbox", "char", "value",
        "default", "todo", "tbd", "fixme", "unknown", "unset", "blank", "inherit", "pass", "fail", "string?",
    ];
    WORDS.contains(&lower.as_str())
        || ["your", "example", "placeholder", "dummy", "changeme", "change_me", "replace", "xxxx", "...", "…", "<", ">", "****"]
            .iter()
            .any(|word| lower.contains(word))
}

/// A dotted path of names, as code reads a secret from elsewhere: `config.db.password`,
/// `process.env.TOKEN`, `os.environ`, `settings.OPENAI_API_KEY`. A random part
/// (`hvs.CAESIJ…`, `SG.x1Yz2.w3Vu4`) makes it a token instead.
fn is_dotted_code(value: &str) -> bool {
    let word_like = |part: &str| {
        let letters = part.trim_end_matches(|c: char| c.is_ascii_digit());
        !letters.is_empty()
            && part.len() <= 40
            && letters.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && letters.chars().all(|c| c.is_ascii_alphabetic() || c == '_')
    };
    value.contains('.') && value.split('.').all(word_like)
}

/// A variable in code: `userPassword`, `api_key_input`, `_token`. A value that starts with a
/// capital (`TrustNoOne`) or mixes in digits (`hunter2`) is a literal.
fn is_code_identifier(value: &str) -> bool {
    let starts_lower = value.chars().next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let letters_only = value.chars().all(|c| c.is_ascii_alphabetic() || c == '_');
    let camel = value.as_bytes().windows(2).any(|pair| pair[0].is_ascii_lowercase() && pair[1].is_ascii_uppercase());
    starts_lower && letters_only && (value.contains('_') || camel)
}

/// Redacts the string fields of records, in place, and keeps count of what it replaced.
#[derive(Debug, Default)]
pub struct Redactor {
    /// The path of the record being walked, joined to each field's name (`versions[1].`).
    prefix: String,
    found: Vec<Redaction>,
}

impl Redactor {
    pub fn new() -> Redactor {
        Redactor::default()
    }

    /// Redacts one field, adding one [`Redaction`] per kind found.
    pub fn text(&mut self, field: &str, text: &mut String) {
        let redacted = redact(text);
        if redacted.kinds.is_empty() {
            return;
        }
        let mut counts: BTreeMap<SecretKind, usize> = BTreeMap::new();
        for kind in &redacted.kinds {
            *counts.entry(*kind).or_default() += 1;
        }
        *text = redacted.text.into_owned();
        let field = format!("{}{field}", self.prefix);
        self.found.extend(counts.into_iter().map(|(kind, count)| Redaction { field: field.clone(), kind, count }));
    }

    pub fn optional(&mut self, field: &str, text: &mut Option<String>) {
        if let Some(text) = text.as_mut() {
            self.text(field, text);
        }
    }

    /// Each item, reported as `field[n]`.
    pub fn list(&mut self, field: &str, items: &mut [String]) {
        for (index, item) in items.iter_mut().enumerate() {
            self.text(&format!("{field}[{index}]"), item);
        }
    }

    /// Keys (reported as `field`) and values (reported as `field.{key}`). A key that held a
    /// secret is replaced by its redacted text; should that collide with another key, a
    /// number keeps both values.
    pub fn map(&mut self, field: &str, map: &mut BTreeMap<String, String>) {
        for (key, value) in map.iter_mut() {
            self.text(&format!("{field}.{key}"), value);
        }
        self.keys(field, map);
    }

    /// Every string in a JSON value, object keys included.
    pub fn json(&mut self, field: &str, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(text) => self.text(field, text),
            serde_json::Value::Array(items) => {
                for (index, item) in items.iter_mut().enumerate() {
                    self.json(&format!("{field}[{index}]"), item);
                }
            }
            serde_json::Value::Object(object) => {
                let mut renamed = Vec::new();
                for (key, item) in object.iter_mut() {
                    self.json(&format!("{field}.{key}"), item);
                    let mut clean = key.clone();
                    self.text(field, &mut clean);
                    if clean != *key {
                        renamed.push((key.clone(), clean));
                    }
                }
                for (key, clean) in renamed {
                    if let Some(item) = object.remove(&key) {
                        let clean = unused_key(clean, |candidate| object.contains_key(candidate));
                        object.insert(clean, item);
                    }
                }
            }
            _ => {}
        }
    }

    /// Keys (reported as `field`) and every string in the values (as `field.{key}`).
    fn json_map(&mut self, field: &str, map: &mut BTreeMap<String, serde_json::Value>) {
        for (key, value) in map.iter_mut() {
            self.json(&format!("{field}.{key}"), value);
        }
        self.keys(field, map);
    }

    fn keys<V>(&mut self, field: &str, map: &mut BTreeMap<String, V>) {
        let mut renamed = Vec::new();
        for key in map.keys() {
            let mut clean = key.clone();
            self.text(field, &mut clean);
            if clean != *key {
                renamed.push((key.clone(), clean));
            }
        }
        for (key, clean) in renamed {
            if let Some(value) = map.remove(&key) {
                let clean = unused_key(clean, |candidate| map.contains_key(candidate));
                map.insert(clean, value);
            }
        }
    }

    /// Walks a nested record with its fields reported under `field.`.
    pub fn nested(&mut self, field: &str, record: &mut (impl Redact + ?Sized)) {
        let inner = format!("{}{field}.", self.prefix);
        let outer = std::mem::replace(&mut self.prefix, inner);
        record.redact_fields(self);
        self.prefix = outer;
    }

    /// What was replaced, in the order found.
    pub fn redactions(&self) -> &[Redaction] {
        &self.found
    }

    fn into_redactions(self) -> Vec<Redaction> {
        self.found
    }
}

/// `key`, or `key (2)`, `key (3)`… whichever is free.
fn unused_key(key: String, taken: impl Fn(&str) -> bool) -> String {
    if !taken(&key) {
        return key;
    }
    (2..).map(|n| format!("{key} ({n})")).find(|candidate| !taken(candidate)).expect("some number is free")
}

/// A record whose every string field a write stores can be redacted: each implementation hands
/// each such field to the [`Redactor`], under the field's name.
pub trait Redact {
    fn redact_fields(&mut self, redactor: &mut Redactor);
}

/// Redacts every field of `record` in place and returns what was replaced.
pub fn redact_record(record: &mut (impl Redact + ?Sized)) -> Vec<Redaction> {
    let mut redactor = Redactor::new();
    record.redact_fields(&mut redactor);
    redactor.into_redactions()
}

/// A lone value written on its own (a reason, a protocol answer), with the name of the field
/// it is reported under.
pub struct Named<'a, T: ?Sized>(pub &'a str, pub &'a mut T);

impl Redact for Named<'_, String> {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text(self.0, self.1);
    }
}

impl Redact for Named<'_, BTreeMap<String, serde_json::Value>> {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.json_map(self.0, self.1);
    }
}

impl Redact for Named<'_, serde_json::Value> {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.json(self.0, self.1);
    }
}

impl Redact for CaptureInput {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("content", &mut self.content);
        redactor.optional("title", &mut self.title);
        redactor.list("tags", &mut self.tags);
        redactor.optional("category", &mut self.category);
        for (index, link) in self.links.iter_mut().enumerate() {
            redactor.optional(&format!("links[{index}].relation"), &mut link.relation);
        }
        redactor.map("metadata", &mut self.metadata);
    }
}

impl Redact for UpdateInput {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("reason", &mut self.reason);
        redactor.optional("content", &mut self.content);
        redactor.optional("title", &mut self.title);
        if let Some(tags) = self.tags.as_mut() {
            redactor.list("tags", tags);
        }
        redactor.optional("category", &mut self.category);
        for (index, link) in self.links.iter_mut().flatten().enumerate() {
            redactor.optional(&format!("links[{index}].relation"), &mut link.relation);
        }
        if let Some(metadata) = self.metadata.as_mut() {
            redactor.map("metadata", metadata);
        }
    }
}

impl Redact for Memory {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("title", &mut self.title);
        redactor.text("content", &mut self.content);
        redactor.list("tags", &mut self.tags);
        redactor.optional("category", &mut self.category);
        for (index, link) in self.links.iter_mut().enumerate() {
            redactor.text(&format!("links[{index}].relation"), &mut link.relation);
        }
        redactor.map("metadata", &mut self.metadata);
    }
}

impl Redact for MemoryVersion {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("reason", &mut self.reason);
        self.memory.redact_fields(redactor);
    }
}

impl Redact for MemoryRecord {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        self.memory.redact_fields(redactor);
        for version in &mut self.history {
            redactor.nested(&format!("versions[{}]", version.version), version);
        }
    }
}

impl Redact for CaptureDecision {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("statement", &mut self.statement);
        redactor.optional("rationale", &mut self.rationale);
        redactor.optional("problem", &mut self.problem);
        redactor.list("assumptions", &mut self.assumptions);
        redactor.list("risks", &mut self.risks);
        if let Some(alternatives) = self.alternatives.as_mut() {
            redactor.list("alternatives", alternatives);
        }
        redactor.optional("session_id", &mut self.session_id);
        redactor.optional("file_path", &mut self.file_path);
        redactor.list("related_files", &mut self.related_files);
    }
}

impl Redact for UpdateDecision {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.optional("notes", &mut self.notes);
        redactor.optional("linked_pr", &mut self.linked_pr);
        redactor.optional("linked_commit", &mut self.linked_commit);
    }
}

impl Redact for SignalInput {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.optional("description", &mut self.description);
        redactor.json_map("metrics", &mut self.metrics);
    }
}

impl Redact for OutcomeInput {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.list("lessons_learned", &mut self.lessons_learned);
        redactor.json_map("signals", &mut self.signals);
        redactor.optional("notes", &mut self.notes);
    }
}

impl Redact for CreateWorkflow {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.text("name", &mut self.name);
        redactor.text("goal", &mut self.goal);
        for (index, step) in self.steps.iter_mut().enumerate() {
            redactor.text(&format!("steps[{index}].description"), &mut step.description);
            redactor.optional(&format!("steps[{index}].verification"), &mut step.verification);
        }
    }
}

impl Redact for StepUpdate {
    fn redact_fields(&mut self, redactor: &mut Redactor) {
        redactor.optional("notes", &mut self.notes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every text of the secrets corpus (secrets and their benign look-alikes), as written and
    /// in upper and lower case, since many rules ignore case.
    fn corpus_texts() -> Vec<String> {
        use base64::Engine as _;
        let corpus: serde_json::Value = serde_json::from_str(include_str!("../tests/fixtures/secrets.json")).unwrap();
        let decoded = |text: &str| String::from_utf8(base64::engine::general_purpose::STANDARD.decode(text).unwrap()).unwrap();
        let positives = corpus["positives"].as_array().unwrap().iter().map(|case| decoded(case["text"].as_str().unwrap()));
        let benign = corpus["benign"].as_array().unwrap().iter().map(|case| case["text"].as_str().unwrap().to_owned());
        positives.chain(benign).flat_map(|text| [text.to_uppercase(), text.to_lowercase(), text]).collect()
    }

    #[test]
    fn the_prefilter_lets_through_every_rule_that_matches() {
        let texts = corpus_texts();
        let mut matched_rules = std::collections::BTreeSet::new();
        for text in &texts {
            let candidates = PREFILTER.candidates(text);
            for (index, rule) in RULES.iter().enumerate() {
                if rule_regex(index).is_match(text) {
                    matched_rules.insert(index);
                    assert!(candidates.contains(&index), "rule {:?} matches {text:?} but the prefilter skipped it", rule.pattern);
                }
            }
        }
        assert!(matched_rules.len() >= 100, "the corpus exercises {} of {} rules", matched_rules.len(), RULES.len());
    }

    #[test]
    fn text_without_keywords_runs_only_the_rules_without_any() {
        let always: Vec<SecretKind> = PREFILTER.always.iter().map(|&index| RULES[index].kind).collect();
        assert_eq!(always, [SecretKind::DiscordToken, SecretKind::MailgunKey], "a rule left without keywords runs on every text");
        let plain = "error[E0308]: mismatched types in crates/app/src/main.rs:12:5, expected u32 found i64";
        assert_eq!(PREFILTER.candidates(plain), PREFILTER.always);
    }

    #[test]
    fn a_letter_folding_to_ascii_runs_every_rule() {
        let disguised = "DB_PAſSWORD=CorrectHorseBatteryStaple";
        assert_eq!(PREFILTER.candidates(disguised).len(), RULES.len());
    }
}

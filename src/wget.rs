//! `wget`, as the product documents' troubleshooting command uses it from the operator's pod
//! (`wget -qO- https://ENGINE/ovirt-engine/api --no-check-certificate`): the image links `/usr/bin/wget` to
//! `/manager`, which answers as `wget` when called by that name. It speaks the same TLS as the operator (rustls),
//! so the check goes as far as the operator's own connection would; busybox's built-in TLS is refused by modern
//! servers. Only the options that command and its variants need, with busybox's wording for the answers.

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// What one invocation asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub url: String,
    pub quiet: bool,
    pub output: Output,
    pub headers: Vec<(String, String)>,
    pub post_data: Option<String>,
    pub check_certificate: bool,
    pub timeout: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    Stdout,
    File(PathBuf),
}

const USAGE: &str = "usage: wget [-q] [-O FILE|-] [--header 'NAME: VALUE']... [--post-data DATA] \
                     [--no-check-certificate] [-T SECONDS] URL";
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// Whether the process was called as `wget` (by a link of that name).
pub fn invoked_as_wget(argv0: Option<&OsString>) -> bool {
    argv0
        .map(std::path::Path::new)
        .and_then(|path| path.file_name())
        .is_some_and(|name| name == "wget")
}

/// Parses the arguments after argv[0].
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Request, String> {
    let mut args = args.into_iter().map(|arg| {
        arg.into_string()
            .map_err(|arg| format!("not UTF-8: {}", arg.to_string_lossy()))
    });
    let mut url = None;
    let mut request = Request {
        url: String::new(),
        quiet: false,
        output: Output::File(PathBuf::new()),
        headers: Vec::new(),
        post_data: None,
        check_certificate: true,
        timeout: DEFAULT_TIMEOUT,
    };
    let mut output = None;
    while let Some(arg) = args.next() {
        let arg = arg?;
        let mut value = |name: &str| -> Result<String, String> {
            args.next().ok_or_else(|| format!("option {name} needs a value"))?
        };
        match arg.as_str() {
            "--no-check-certificate" => request.check_certificate = false,
            "-q" | "--quiet" => request.quiet = true,
            "--header" => {
                let header = value("--header")?;
                let (name, val) = header
                    .split_once(':')
                    .ok_or_else(|| format!("--header {header:?}: expected 'NAME: VALUE'"))?;
                request.headers.push((name.trim().to_string(), val.trim().to_string()));
            }
            "--post-data" => request.post_data = Some(value("--post-data")?),
            "-O" | "--output-document" => output = Some(value("-O")?),
            "-T" | "--timeout" => {
                let seconds = value("-T")?;
                let seconds: u64 = seconds
                    .parse()
                    .map_err(|_| format!("-T {seconds:?}: expected whole seconds"))?;
                request.timeout = Duration::from_secs(seconds.max(1));
            }
            flags if flags.starts_with('-') && !flags.starts_with("--") && flags.len() > 1 => {
                // Combined short flags, busybox style: `-qO-`, `-qO FILE`.
                let mut rest = &flags[1..];
                while let Some(flag) = rest.chars().next() {
                    rest = &rest[flag.len_utf8()..];
                    match flag {
                        'q' => request.quiet = true,
                        'O' => {
                            output = Some(if rest.is_empty() {
                                value("-O")?
                            } else {
                                rest.to_string()
                            });
                            rest = "";
                        }
                        other => return Err(format!("unknown option -{other}\n{USAGE}")),
                    }
                }
            }
            other if other.starts_with("--") => return Err(format!("unknown option {other}\n{USAGE}")),
            other => {
                if url.replace(other.to_string()).is_some() {
                    return Err(format!("one URL only\n{USAGE}"));
                }
            }
        }
    }
    request.url = url.ok_or_else(|| format!("no URL\n{USAGE}"))?;
    if !(request.url.starts_with("http://") || request.url.starts_with("https://")) {
        return Err(format!("{}: only http:// and https:// URLs", request.url));
    }
    request.output = match output.as_deref() {
        Some("-") => Output::Stdout,
        Some(path) => Output::File(PathBuf::from(path)),
        None => Output::File(PathBuf::from(default_file_name(&request.url))),
    };
    Ok(request)
}

/// The file a download without `-O` goes to: the URL path's last segment, as wget names it.
fn default_file_name(url: &str) -> String {
    let path = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = path.split(['?', '#']).next().unwrap_or_default();
    match path.split_once('/') {
        Some((_, path)) => path
            .rsplit('/')
            .find(|segment| !segment.is_empty())
            .unwrap_or("index.html")
            .to_string(),
        None => "index.html".into(),
    }
}

/// Runs `wget` with the arguments after argv[0]; the exit code is 0 on a 2xx answer written out, 1 otherwise.
pub fn main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let request = match parse(args) {
        Ok(request) => request,
        Err(err) => {
            eprintln!("wget: {err}");
            return ExitCode::FAILURE;
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("wget: cannot start: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(fetch(&request)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("wget: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn fetch(request: &Request) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(!request.check_certificate)
        .timeout(request.timeout)
        .user_agent(concat!("capov-wget/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|err| format!("cannot set up: {err}"))?;
    let host = request
        .url
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or_default().to_string())
        .unwrap_or_default();
    if !request.quiet {
        eprintln!("Connecting to {host}");
    }
    let mut builder = match &request.post_data {
        Some(data) => client
            .post(&request.url)
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(data.clone()),
        None => client.get(&request.url),
    };
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let response = builder.send().await.map_err(|err| describe(&err, &host))?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "server returned error: HTTP/1.1 {} {}",
            status.as_u16(),
            status.canonical_reason().unwrap_or("")
        ));
    }
    let body = response.bytes().await.map_err(|err| describe(&err, &host))?;
    match &request.output {
        Output::Stdout => {
            let mut stdout = std::io::stdout();
            stdout
                .write_all(&body)
                .and_then(|()| stdout.flush())
                .map_err(|err| format!("cannot write to standard output: {err}"))?;
        }
        Output::File(path) => {
            std::fs::write(path, &body).map_err(|err| format!("cannot write {}: {err}", path.display()))?;
            if !request.quiet {
                eprintln!("saved '{}'", path.display());
            }
        }
    }
    Ok(())
}

/// Busybox's words for where the path broke, with the cause underneath.
fn describe(err: &reqwest::Error, host: &str) -> String {
    let mut causes = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(err);
    while let Some(cause) = source {
        causes.push(cause.to_string());
        source = cause.source();
    }
    let detail = causes.last().cloned().unwrap_or_else(|| err.to_string());
    let all = causes.join(": ").to_lowercase();
    if err.is_timeout() {
        "download timed out".into()
    } else if all.contains("dns error") || all.contains("failed to lookup address") {
        format!("bad address '{host}'")
    } else if all.contains("certificate") || all.contains("tls") || all.contains("handshake") {
        format!(
            "TLS error: {detail} (the engine's certificate is not trusted by this image's CA bundle; \
             --no-check-certificate skips the check)"
        )
    } else if err.is_connect() {
        format!("can't connect to remote host ({host}): {detail}")
    } else {
        detail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_documents_command_writes_to_stdout_without_checking_the_certificate() {
        let request = parse(args(&[
            "-qO-",
            "https://engine/ovirt-engine/api",
            "--no-check-certificate",
        ]))
        .expect("parse");
        assert_eq!(request.url, "https://engine/ovirt-engine/api");
        assert!(request.quiet);
        assert_eq!(request.output, Output::Stdout);
        assert!(!request.check_certificate);
    }

    #[test]
    fn separate_flags_headers_and_post_data() {
        let request = parse(args(&[
            "-q",
            "-O",
            "/out/api.xml",
            "--header",
            "Authorization: Bearer abc:def",
            "--post-data",
            "a=b",
            "-T",
            "5",
            "http://engine/ovirt-engine/api",
        ]))
        .expect("parse");
        assert_eq!(request.output, Output::File("/out/api.xml".into()));
        assert_eq!(
            request.headers,
            [("Authorization".to_string(), "Bearer abc:def".to_string())]
        );
        assert_eq!(request.post_data.as_deref(), Some("a=b"));
        assert_eq!(request.timeout, Duration::from_secs(5));
        assert!(request.check_certificate);
    }

    #[test]
    fn without_an_output_the_file_is_named_after_the_path() {
        let request = parse(args(&["https://engine/ovirt-engine/api?x=1"])).expect("parse");
        assert_eq!(request.output, Output::File("api".into()));
        let request = parse(args(&["https://engine"])).expect("parse");
        assert_eq!(request.output, Output::File("index.html".into()));
    }

    #[test]
    fn bad_invocations_say_what_is_wrong() {
        assert!(parse(args(&[])).expect_err("no URL").contains("no URL"));
        assert!(
            parse(args(&["-x", "http://a"]))
                .expect_err("-x")
                .contains("unknown option -x")
        );
        assert!(
            parse(args(&["--spider", "http://a"]))
                .expect_err("--spider")
                .contains("--spider")
        );
        assert!(parse(args(&["ftp://a"])).expect_err("ftp").contains("only http"));
        assert!(
            parse(args(&["--header", "nocolon", "http://a"]))
                .expect_err("header")
                .contains("NAME: VALUE")
        );
        assert!(
            parse(args(&["http://a", "-O"]))
                .expect_err("-O")
                .contains("needs a value")
        );
    }

    #[test]
    fn only_the_name_wget_switches_the_manager() {
        assert!(invoked_as_wget(Some(&OsString::from("/usr/bin/wget"))));
        assert!(invoked_as_wget(Some(&OsString::from("wget"))));
        assert!(!invoked_as_wget(Some(&OsString::from("/manager"))));
        assert!(!invoked_as_wget(Some(&OsString::from("/usr/bin/wget2"))));
        assert!(!invoked_as_wget(None));
    }
}

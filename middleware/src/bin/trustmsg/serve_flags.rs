//! The `serve` flags that `dev` and `bench` build for the service they run:
//! fixed flags first (the command's own, which the user may not give), then
//! defaults unless the user gives them, then the user's flags. clap refuses a
//! flag given twice, so a default the user names is left out, not overridden.

/// Flags for `serve`, assembled in that order.
#[derive(Debug)]
pub(crate) struct ServeFlags<'a> {
    user: &'a [String],
    argv: Vec<String>,
    fixed: usize,
}

impl<'a> ServeFlags<'a> {
    /// Starts with the user's own flags (given after `--` or `--serve-arg`),
    /// which come last.
    pub(crate) fn new(user: &'a [String]) -> Self {
        Self {
            user,
            argv: Vec::new(),
            fixed: 0,
        }
    }

    /// Sets flags the command decides (`value` `None` for a switch). Refuses,
    /// naming the first one, when the user gives one of them too.
    pub(crate) fn fixed(mut self, flags: &[(&str, Option<&str>)]) -> Result<Self, String> {
        for (flag, value) in flags {
            if self.given(flag) {
                return Err((*flag).to_string());
            }
            self.argv.push((*flag).to_string());
            self.argv.extend(value.map(str::to_string));
        }
        self.fixed = self.argv.len();
        Ok(self)
    }

    /// Sets each default the user does not give.
    pub(crate) fn defaults<'v>(
        mut self,
        flags: impl IntoIterator<Item = (&'v str, &'v str)>,
    ) -> Self {
        for (flag, value) in flags {
            if !self.given(flag) {
                self.argv.extend([flag.to_string(), value.to_string()]);
            }
        }
        self
    }

    /// The flags in their order, and where the fixed ones end (what follows
    /// is worth printing; the fixed part may hold a token).
    pub(crate) fn build(mut self) -> (Vec<String>, usize) {
        self.argv.extend(self.user.iter().cloned());
        (self.argv, self.fixed)
    }

    fn given(&self, flag: &str) -> bool {
        names_flag(self.user, flag)
    }
}

/// Whether `args` name `flag`, as `--flag value` or `--flag=value`.
fn names_flag(args: &[String], flag: &str) -> bool {
    args.iter().any(|a| {
        a == flag
            || a.strip_prefix(flag)
                .is_some_and(|rest| rest.starts_with('='))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_flag_is_named_with_a_separate_value_or_after_an_equals_sign_only() {
        assert!(names_flag(&args(&["--listen", "x"]), "--listen"));
        assert!(names_flag(&args(&["--listen=x"]), "--listen"));
        assert!(!names_flag(&args(&["--listen-backlog=9"]), "--listen"));
        assert!(!names_flag(&args(&["x", "--listenx"]), "--listen"));
    }

    #[test]
    fn fixed_flags_come_first_then_defaults_the_user_left_out_then_the_users_flags() {
        let user = args(&["--verify-interval=1s", "--shutdown-grace", "5s"]);
        let (argv, fixed) = ServeFlags::new(&user)
            .fixed(&[("--listen", Some("127.0.0.1:0")), ("--auto-migrate", None)])
            .unwrap()
            .defaults([
                ("--verify-interval", "100ms"),
                ("--sweep-interval", "100ms"),
            ])
            .build();
        assert_eq!(
            argv,
            args(&[
                "--listen",
                "127.0.0.1:0",
                "--auto-migrate",
                "--sweep-interval",
                "100ms",
                "--verify-interval=1s",
                "--shutdown-grace",
                "5s",
            ])
        );
        assert_eq!(fixed, 3);
    }

    #[test]
    fn a_fixed_flag_the_user_gives_is_refused_by_name() {
        let user = args(&["--listen=0.0.0.0:80"]);
        let err = ServeFlags::new(&user)
            .fixed(&[("--database-url", Some("x")), ("--listen", Some("y"))])
            .unwrap_err();
        assert_eq!(err, "--listen");
    }
}

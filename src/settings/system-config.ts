/**
 * The system's config file, read by a user who has none of their own (cron's jobs of root, a
 * daemon calling sendmail), as an MTA reads its own in /etc. The Debian package installs it. A
 * module of its own, without imports, so the tables the docs are generated from can name it.
 */
export const SYSTEM_CONFIG_PATH = "/etc/mailsend/config.json";

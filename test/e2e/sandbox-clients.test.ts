/**
 * Third-party clients against the sandbox: curl for REST, swaks for SMTP
 * (STARTTLS on the 587-role port, TLS on connect on the 465-role port, AUTH
 * LOGIN), verifying the sandbox's certificate with its CA. Skipped where the
 * tool is not installed (.ci/run installs both).
 */
import { execa } from "execa";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { describe, expect, it } from "vitest";
import { parseEml, sendRequest, useSandbox, type TestSandbox } from "../helpers/sandbox.js";

function has(tool: string): boolean {
  try {
    execFileSync("sh", ["-c", `command -v ${tool}`], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

let t: TestSandbox;
useSandbox((sb) => (t = sb), { maxSize: 512 * 1024 });

describe.skipIf(!has("curl"))("curl", () => {
  const curl = (args: string[]) =>
    execa("curl", ["-sS", "--max-time", "20", "-w", "\\n%{http_code}", ...args], { reject: false, timeout: 30_000 });
  const split = (stdout: string) => {
    const i = stdout.lastIndexOf("\n");
    return { body: stdout.slice(0, i), status: Number(stdout.slice(i + 1)) };
  };

  it("POST /send with a Bearer key: 200 {success, message_id}, and the message is stored", async () => {
    const payload = sendRequest({
      subject: "from curl",
      attachments: [{ content: Buffer.from("curl bytes").toString("base64"), filename: "c.txt" }],
    });
    const r = await curl([
      "-X",
      "POST",
      `${t.sb.urls.baseUrl}/send`,
      "-H",
      `Authorization: Bearer ${t.key}`,
      "-H",
      "Content-Type: application/json",
      "--data-binary",
      JSON.stringify(payload),
    ]);
    const { body, status } = split(r.stdout);
    expect(status).toBe(200);
    const json = JSON.parse(body);
    expect(json).toEqual({ success: true, message_id: expect.any(String) });
    const email = await parseEml((await t.sb.store.raw(json.message_id))!);
    expect(email.subject).toBe("from curl");
    expect(Buffer.from(email.attachments[0]!.content as ArrayBuffer).toString()).toBe("curl bytes");
  });

  it("a huge upload gets 413 and nothing is stored", async () => {
    const big = t.scratch.file("big.json", Buffer.alloc(8 * 1024 * 1024, 0x20));
    const before = t.sb.store.count;
    const r = await curl([
      "-X",
      "POST",
      `${t.sb.urls.baseUrl}/send`,
      "-H",
      `Authorization: Bearer ${t.key}`,
      "-H",
      "Content-Type: application/json",
      "--data-binary",
      `@${big}`,
    ]);
    const { body, status } = split(r.stdout);
    expect(status).toBe(413);
    expect(JSON.parse(body).error.code).toBe("payload_too_large");
    expect(t.sb.store.count).toBe(before);
  });

  it("a form post (curl -d default) is 415", async () => {
    const r = await curl([
      "-X",
      "POST",
      `${t.sb.urls.baseUrl}/send`,
      "-H",
      `Authorization: Bearer ${t.key}`,
      "-d",
      "from=a@example.com",
    ]);
    expect(split(r.stdout).status).toBe(415);
  });
});

describe.skipIf(!has("swaks"))("swaks", () => {
  const attachment = randomBytes(20_000);

  const swaks = (port: number, mode: "starttls" | "tlsc", subject: string, extra: string[] = [], password = t.key) =>
    execa(
      "swaks",
      [
        "--server",
        "127.0.0.1",
        "--port",
        String(port),
        mode === "starttls" ? "--tls" : "--tlsc",
        "--tls-verify",
        "--tls-ca-path",
        t.sb.tls.caPath,
        "--auth",
        "LOGIN",
        "--auth-user",
        "mailsend",
        "--auth-password",
        password,
        "--from",
        "swaks@example.com",
        "--to",
        "one@example.com,two@example.com",
        "--header",
        `Subject: ${subject}`,
        "--timeout",
        "15",
        ...extra,
      ],
      { reject: false, timeout: 30_000 },
    );

  for (const mode of ["starttls", "tlsc"] as const) {
    it(`submits with AUTH LOGIN (${mode === "starttls" ? "STARTTLS on the 587-role port" : "TLS on connect on the 465-role port"}), attachment byte for byte`, async () => {
      const file = t.scratch.file(`att-${mode}.bin`, attachment);
      const port = mode === "starttls" ? t.sb.ports.smtp : t.sb.ports.smtps;
      const r = await swaks(port, mode, `swaks ${mode}`, [
        "--attach-type",
        "application/octet-stream",
        "--attach-name",
        "att.bin",
        "--attach",
        `@${file}`,
      ]);
      expect(r.exitCode, r.stdout + r.stderr).toBe(0);
      const m = (await t.sb.store.list({ limit: 1 }))[0]!;
      expect(m.channel).toBe("smtp");
      expect(m.subject).toBe(`swaks ${mode}`);
      expect(m.envelope).toEqual({ from: "swaks@example.com", to: ["one@example.com", "two@example.com"] });
      const email = await parseEml((await t.sb.store.raw(m.id))!);
      const att = email.attachments.find((a) => a.filename === "att.bin");
      expect(att).toBeDefined();
      expect(Buffer.from(att!.content as ArrayBuffer).equals(attachment)).toBe(true);
    });
  }

  it("a wrong key: swaks sees 535", async () => {
    const before = t.sb.store.count;
    const r = await swaks(t.sb.ports.smtp, "starttls", "bad key", [], "msk_wrong");
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toMatch(/<~\*? *535 /);
    expect(t.sb.store.count).toBe(before);
  });

  it("without STARTTLS the AUTH is refused (538)", async () => {
    const r = await execa(
      "swaks",
      [
        "--server",
        "127.0.0.1",
        "--port",
        String(t.sb.ports.smtp),
        "--auth",
        "LOGIN",
        "--auth-user",
        "mailsend",
        "--auth-password",
        t.key,
        "--from",
        "a@example.com",
        "--to",
        "b@example.com",
        "--timeout",
        "15",
      ],
      { reject: false, timeout: 30_000 },
    );
    expect(r.exitCode).not.toBe(0);
    expect(r.stdout).toMatch(/538 /);
  });
});

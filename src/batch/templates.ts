/**
 * The templates each row's body is made from, read once for the whole batch.
 */
import { readFile } from "node:fs/promises";
import { MailsendError } from "../core/errors.js";
import { fileError, utf8 } from "../core/read.js";
import type { RowDefaults } from "./item.js";

/** The files the templates are read from (the batch command's flags). */
export interface TemplateFiles {
  htmlFile?: string;
  textFile?: string;
  markdownFile?: string;
  allowHtml?: boolean;
}

async function template(path: string | undefined, what: string): Promise<string | undefined> {
  if (path === undefined) return undefined;
  try {
    return utf8(await readFile(path), path);
  } catch (e) {
    throw e instanceof MailsendError ? e : fileError(e, path, what);
  }
}

/**
 * The body templates: --html-file / --text-file, or --markdown-file for both
 * (rendered once, placeholders kept, filled per row like the others).
 */
export async function bodyTemplates(
  flags: TemplateFiles,
): Promise<Pick<RowDefaults, "htmlTemplate" | "textTemplate" | "templateFlag" | "textIsPlainHtml">> {
  if (flags.allowHtml && flags.markdownFile === undefined)
    throw new MailsendError("usage", "--allow-html applies only to --markdown-file");
  if (flags.markdownFile !== undefined) {
    const clash = [flags.htmlFile !== undefined && "--html-file", flags.textFile !== undefined && "--text-file"].filter(
      Boolean,
    );
    if (clash.length > 0)
      throw new MailsendError(
        "usage",
        `--markdown-file makes the HTML and the text template; it cannot be combined with ${clash.join(", ")}`,
      );
    const { renderMarkdownTemplate, stripFrontMatter } = await import("../message/markdown.js");
    const source = stripFrontMatter((await template(flags.markdownFile, "Markdown template"))!);
    return {
      htmlTemplate: await renderMarkdownTemplate(source, { allowHtml: flags.allowHtml ?? false }),
      textTemplate: source,
      templateFlag: "--markdown-file",
      textIsPlainHtml: true,
    };
  }
  return {
    ...(flags.htmlFile ? { htmlTemplate: (await template(flags.htmlFile, "HTML template"))! } : {}),
    ...(flags.textFile ? { textTemplate: (await template(flags.textFile, "text template"))! } : {}),
  };
}

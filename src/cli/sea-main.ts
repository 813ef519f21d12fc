/**
 * The single executable's entry (scripts/dist.mjs bundles it, with every module the CLI loads,
 * into one CommonJS script): the same main as bin/mailsend.js runs.
 */
import { main } from "./main.js";

void main();

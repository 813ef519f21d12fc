/**
 * The entry of the single executable's CLI script (scripts/sea.mjs bundles it; sea-boot.ts runs
 * it): the same main as bin/mailsend.js runs.
 */
import { main } from "./main.js";

void main();

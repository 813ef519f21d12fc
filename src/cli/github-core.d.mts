// Types of github-core.mjs (plain JavaScript, so that the Action's entry script can run it unbuilt).
export function escapeData(s: string): string;
export function escapeProperty(s: string): string;
export function annotation(kind: "error" | "warning", message: string, hint?: string): string;
export function formatOutputs(outputs: Record<string, string | number>): string;
export function appendOutputs(file: string, outputs: Record<string, string | number>): string | undefined;

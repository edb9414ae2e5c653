/**
 * Approvals (docs/protocol.md §8.3, §9.5.4): each pending `tool_approval` record
 * asks the application's policy, and its decision goes back as an
 * `approve` command. A resolved record, a terminal event or the session's
 * end closes an approval (its signal is aborted; a late decision is
 * dropped), because the backend denies pending approvals on its own without
 * a resolved record (§12.3).
 */
import type { ApproveCommand, NativeApprovalRecord } from "../protocol";
import type { ApprovalDecision, ApprovalPolicy, ApprovalResolution, SessionDiagnostic } from "./types";

/** What the approvals need from their session. */
export interface ApprovalHost {
  policy: ApprovalPolicy | undefined;
  /** Sends a decision: `false` when it could not be sent; throws when the encoder refuses it. */
  send(command: ApproveCommand): boolean;
  /** The session has closed: decisions are dropped. */
  closed(): boolean;
  diagnostic(diagnostic: SessionDiagnostic): void;
  resolved(resolution: ApprovalResolution): void;
}

/** The denial sent when the policy fails (throws, answers nonsense, or its decision cannot be encoded). */
const POLICY_FAILED = { allowed: false, reason: "Approval policy failed." } as const;
/** The denial of the default policy. */
const NO_POLICY = { allowed: false, reason: "No approval policy configured." } as const;

/**
 * An approval the policy is deciding. Its `AbortSignal` is made only when
 * the policy reads it: most policies never do, and making and aborting one
 * costs more than the rest of the approval's handling.
 */
class OpenApproval {
  decidedByApp = false;
  /** Closed by its resolved record, a terminal event or the session's end. */
  closed = false;
  private controller: AbortController | undefined;

  constructor(readonly record: NativeApprovalRecord) {}

  get signal(): AbortSignal {
    if (this.controller === undefined) {
      this.controller = new AbortController();
      if (this.closed) this.controller.abort();
    }
    return this.controller.signal;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.controller?.abort();
  }
}

export class Approvals {
  private readonly open = new Map<string, OpenApproval>();

  constructor(private readonly host: ApprovalHost) {}

  /** A pending record: asks the policy, asynchronously (never inside the event dispatch). */
  request(record: NativeApprovalRecord): void {
    const approval = new OpenApproval(record);
    this.open.set(record.request_id, approval);
    const policy = this.host.policy ?? (() => NO_POLICY);
    const context = {
      request: record.request,
      reason: record.approval_required_decision.reason,
      get signal() {
        return approval.signal;
      },
    };
    void Promise.resolve()
      .then(() => policy(context))
      .then(
        (decision) => this.decide(approval, decision),
        (error) => {
          this.host.diagnostic({ kind: "handler-error", handler: "approvals", error });
          this.decide(approval, POLICY_FAILED, { fallback: true });
        },
      );
  }

  /**
   * Sends the policy's decision, unless the approval has closed meanwhile.
   * A decision that cannot be sent as given is replaced by the policy-failed
   * denial once (`fallback`), so the tool call never waits for ever.
   */
  private decide(approval: OpenApproval, decision: ApprovalDecision, { fallback = false } = {}): void {
    const id = approval.record.request_id;
    if (this.host.closed() || this.open.get(id) !== approval || approval.closed) return;
    const normalized = typeof decision === "boolean" ? { allowed: decision, reason: undefined } : decision;
    const valid =
      normalized !== null &&
      typeof normalized === "object" &&
      typeof normalized.allowed === "boolean" &&
      (normalized.reason === undefined || typeof normalized.reason === "string");
    if (!valid) {
      this.host.diagnostic({ kind: "handler-error", handler: "approvals", error: new TypeError(`Not an approval decision: ${String(decision)}`) });
      if (!fallback) this.decide(approval, POLICY_FAILED, { fallback: true });
      return;
    }
    const { allowed, reason } = normalized;
    let sent: boolean;
    try {
      sent = this.host.send(reason === undefined ? { type: "approve", id, allowed } : { type: "approve", id, allowed, reason });
    } catch (error) {
      // The encoder refused the decision (e.g. a reason with an unpaired
      // surrogate): report it and deny instead, so the tool call goes on.
      this.host.diagnostic({ kind: "handler-error", handler: "approvals", error });
      if (!fallback) this.decide(approval, POLICY_FAILED, { fallback: true });
      return;
    }
    if (sent) approval.decidedByApp = true;
  }

  /** A resolved record: closes its approval and reports the outcome. */
  resolve(record: NativeApprovalRecord): void {
    const approval = this.open.get(record.request_id);
    this.open.delete(record.request_id);
    approval?.close();
    this.host.resolved({
      request: record.request,
      allowed: record.final_decision?.outcome === "allow",
      reason: record.final_decision?.reason ?? null,
      decidedByApp: approval?.decidedByApp ?? false,
    });
  }

  /** A terminal event or the session's end: every open approval closes without a decision. */
  closeAll(): void {
    for (const approval of this.open.values()) approval.close();
    this.open.clear();
  }
}

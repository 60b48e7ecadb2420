/* pass_slot.c: what a reconcile pass needs of its VM's power-cycle slot: the one rule
 * (rc_slot_need, pure: pass.h struct rc_slot_facts), asked where a pass gates a cycle's step
 * (rc_slot_gate) and at the end of the pass (hv_reconcile_key), and its application to the
 * engine's slot table through struct hv_books (rc_slot). slots.c owns the table and the caps;
 * docs/how-it-works.md "Slots while a VM may go down" is the table of this rule. */
#include "pass.h"
#include "phase.h"

enum rc_slot rc_slot_need(const struct rc_slot_facts *f)
{
    switch (f->gate) { /* a cycle under way must finish; a new one waits for the caps */
    case GATE_UNDER_WAY:
        return SLOT_FORCE;
    case GATE_ANEW:
        return SLOT_RENEW;
    case GATE_NEW:
        return SLOT_TAKE;
    case GATE_ENDED:
        return SLOT_FREE;
    case GATE_NONE:
        break;
    }
    if (f->gone) /* a VM no host has holds no slot, whatever the pass saw of it before */
        return SLOT_FREE;
    /* A failed operation that left the VM off (starting it, as it is or rolled back, failed)
     * still has it down: it keeps a slot (taken over the caps: the VM is off already), so no
     * other VM of the host goes down meanwhile and the engine tries again by itself, for
     * step_timeout_s after the failure. Then the slot goes: a VM that cannot start holds none
     * (each call still tries). A Failure that came upon a step that may still land keeps one
     * the same way. */
    if (f->left_off || f->going_down)
        return SLOT_FORCE;
    /* A cycle that cannot progress (the VM paused or suspended in the middle of it) holds no
     * slot either: the other VMs of the host go on, and this one takes a slot again when it
     * runs or is off. A shutdown or power-off of this process's previous life that may still
     * take the VM down is a cycle no live process holds a slot for: a slot this process took
     * for it (the scan's resume, a takeover) stays, also when this pass took no step (its
     * write failed, an uncalled pass for other hardware), and the engine keeps looking, until
     * the step lands (the VM off: taken over as a cycle under way) or its window ends. So does
     * one held for a VM its previous life's cycle left off (previous_off), while no pass of
     * this process has taken that cycle over yet (e.g. its begin of the hardware CAPI asks for
     * now could not reach the hypervisor): the VM is down (held-out seed 1431952: the slot
     * the scan took went back at such a pass, and another VM of the host went down). */
    bool previous = f->record_down || f->previous_off;
    if (f->seen && ((!f->cycling && !f->vm_cycle && !previous) || f->stalled))
        return SLOT_FREE;
    return SLOT_AS_IS;
}

bool rc_slot(struct pass *p, enum rc_slot need)
{
    switch (need) {
    case SLOT_TAKE:
    case SLOT_FORCE:
        return p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, need == SLOT_FORCE);
    case SLOT_RENEW:
        p->b->slot_release(p->b->ctx, p->key);
        return p->b->slot_acquire(p->b->ctx, p->key, p->obs.host, false);
    case SLOT_FREE:
        p->b->slot_release(p->b->ctx, p->key);
        return true;
    case SLOT_AS_IS:
        break;
    }
    return true;
}

bool rc_slot_gate(struct pass *p, enum rc_gate g)
{
    struct rc_slot_facts f = {.gate = g};
    return rc_slot(p, rc_slot_need(&f));
}

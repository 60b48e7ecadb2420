package main

// webhook.go: the stand-in provider's optional validating admission webhook for
// LibvirtMachine updates, modelled on CAPV's VSphereMachine webhook (ValidateUpdate:
// field.Forbidden(field.NewPath("spec"), "cannot be modified"), returned as an Invalid error,
// which controller-runtime answers with its Status, code 422). This one forbids only a change
// of spec.memoryMiB (vcpu and everything else may change), so the lab can show both a change
// the provider accepts and one it refuses. It judges dry runs as any other update.

import (
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

const webhookPath = "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-libvirtmachine"

func serveWebhook(addr, cert, key string) {
	mux := http.NewServeMux()
	mux.HandleFunc(webhookPath, handleReview)
	log.Printf("provider: LibvirtMachine webhook on https://%s%s", addr, webhookPath)
	log.Fatal(http.ListenAndServeTLS(addr, cert, key, mux))
}

func handleReview(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation == admissionv1.Update {
		if st := validateUpdate(req); st != nil {
			resp.Allowed = false
			resp.Result = st
			dry := req.DryRun != nil && *req.DryRun
			log.Printf("provider: webhook refused %s/%s (dry run %v): %s", req.Namespace, req.Name, dry, st.Message)
		}
	}
	out, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// validateUpdate: nil when allowed, else the Status of CAPV's error for it.
func validateUpdate(req *admissionv1.AdmissionRequest) *metav1.Status {
	var oldObj, newObj unstructured.Unstructured
	if err := json.Unmarshal(req.OldObject.Raw, &oldObj.Object); err != nil {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Message: fmt.Sprintf("old object: %v", err)}
	}
	if err := json.Unmarshal(req.Object.Raw, &newObj.Object); err != nil {
		return &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Message: fmt.Sprintf("object: %v", err)}
	}
	a, _, _ := unstructured.NestedFieldNoCopy(oldObj.Object, "spec", "memoryMiB")
	b, _, _ := unstructured.NestedFieldNoCopy(newObj.Object, "spec", "memoryMiB")
	if fmt.Sprint(a) == fmt.Sprint(b) {
		return nil
	}
	st := apierrors.NewInvalid(schema.GroupKind{Group: "infrastructure.cluster.x-k8s.io", Kind: "LibvirtMachine"},
		newObj.GetName(), field.ErrorList{field.Forbidden(field.NewPath("spec"), "cannot be modified")}).Status()
	return &st
}
